"""A time limit for one call on untrusted input (a tool call, a domain's parse or score of a model's text): none may
hang a run.

The limit is SIGALRM's interval timer, so it interrupts Python code only (a long C call, one ``re`` match or one
``json.loads``, finishes first: the domains' size limits keep those short) and only in the main thread (elsewhere
the block runs unlimited). Limits nest: an inner block ends no later than the outer one's deadline, and a
:class:`CallTimeout` an inner block swallows still reaches the outer block once it is past its own deadline.
"""

from __future__ import annotations

import signal
import threading
import time
from contextlib import contextmanager


class CallTimeout(Exception):
    pass


# the open blocks' (deadline on time.monotonic(), limit in seconds), the innermost last
_DEADLINES: list[tuple[float, float]] = []
REPEAT_S = 0.05   # past a deadline the timer fires again this often until its block ends (code may swallow one)


def _arm(now: float) -> None:
    """The timer set for the innermost open block's deadline (at once, where it has passed), then repeating."""
    signal.setitimer(signal.ITIMER_REAL, max(1e-6, _DEADLINES[-1][0] - now), REPEAT_S)


def _expired(signum, frame):
    if not _DEADLINES or time.monotonic() < _DEADLINES[-1][0]:
        return   # no block past its deadline (a timer that fired as its block ended)
    raise CallTimeout(f"call exceeded {_DEADLINES[-1][1]:g} s")


@contextmanager
def time_limit(seconds: float):
    """Interrupt the block with :class:`CallTimeout` after ``seconds`` (main thread only; elsewhere, or with
    ``seconds`` <= 0, the block runs unlimited). Past the deadline it is raised again every ``REPEAT_S`` until
    the block ends, so code that catches it cannot run on."""
    if threading.current_thread() is not threading.main_thread() or seconds <= 0:
        yield
        return
    now = time.monotonic()
    outer = _DEADLINES[-1] if _DEADLINES else None
    previous = signal.signal(signal.SIGALRM, _expired) if outer is None else None
    deadline = now + seconds
    _DEADLINES.append((deadline, seconds) if outer is None or deadline < outer[0] else outer)
    _arm(now)
    try:
        yield
    finally:
        depth = len(_DEADLINES) - 1
        while True:   # the cleanup itself may be interrupted by the repeating timer: done again until it is whole
            try:
                signal.setitimer(signal.ITIMER_REAL, 0)
                del _DEADLINES[depth:]
                if outer is None:
                    signal.signal(signal.SIGALRM, previous)
                break
            except CallTimeout:
                continue
        if outer is not None:
            _arm(time.monotonic())   # the outer block's time goes on (past its deadline: it fires now)
