"""A time limit for one tool call (untrusted input runs in pure-Python tools; none may hang a run)."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager


class CallTimeout(Exception):
    pass


@contextmanager
def time_limit(seconds: float):
    """Interrupt the block after ``seconds`` (main thread only; elsewhere the call runs unlimited)."""
    if threading.current_thread() is not threading.main_thread() or seconds <= 0:
        yield
        return

    def _raise(signum, frame):
        raise CallTimeout(f"call exceeded {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
