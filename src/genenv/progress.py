"""Progress display: tqdm bars on a terminal, plain periodic lines anywhere else.

Redirected to a file or a pipe (``make run > log 2>&1``, CI, a cluster job), a tqdm bar writes hundreds of
carriage-return refreshes into the log; :class:`PlainProgress` writes one line per ``interval`` seconds and
one when the work ends instead. Both offer the part of tqdm's interface the library uses.

Everything a run tells a person while it works (warm-start lines, epoch lines, progress) goes to one stream,
standard output, so `genenv run > log` keeps it in order in one file; standard error carries warnings and
errors only.
"""

from __future__ import annotations

import sys
import time

from tqdm.auto import tqdm


def progress_bar(total: int, desc: str, enabled: bool = True, initial: int = 0, leave: bool = True,
                 stream=None):
    """A progress display for ``total`` steps: tqdm when ``stream`` (stdout, where the run's log lines go) is a
    terminal, else plain lines."""
    stream = stream or sys.stdout
    if enabled and not _is_terminal(stream):
        return PlainProgress(total, desc, initial, stream=stream)
    return tqdm(total=total, desc=desc, initial=initial, disable=not enabled, dynamic_ncols=True, leave=leave,
                file=stream)


def warm_start_progress(total: int, desc: str, enabled: bool):
    """A warm start's display: :func:`progress_bar` where the run shows progress; with ``progress: false`` still a
    plain line every 30 s of a long one (a real model's warm start takes minutes, with nothing else on the
    console), and none for one shorter than that."""
    if enabled:
        return progress_bar(total, desc, leave=False)
    return PlainProgress(total, desc, quiet_when_short=True)


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def skip(progress, n: int) -> None:
    """Count ``n`` steps done before (a resumed loop) as done, left out of the rate and the time left."""
    if n <= 0:
        return
    if isinstance(progress, PlainProgress):
        progress.skip(n)
    elif isinstance(progress, tqdm) and not progress.disable:
        progress.initial += n
        progress.n += n
        progress.last_print_n = progress.n
        progress.refresh()
    elif progress is not None:
        progress.update(n)


class PlainProgress:
    """``desc: n/total (pct%), elapsed, ~left [phase]`` every ``interval`` seconds and once at the end, one line
    each (for logs: no carriage returns); ``quiet_when_short``: no line at the end of work that printed none
    before (it took less than ``interval``)."""

    def __init__(self, total: int, desc: str, initial: int = 0, interval: float = 30.0, stream=None,
                 quiet_when_short: bool = False):
        self.total, self.desc, self.n, self.interval = total, desc, initial, interval
        self.quiet_when_short, self._printed = quiet_when_short, False
        self.stream = stream or sys.stdout
        self._initial = initial
        self._start = self._last = time.monotonic()
        self._closed = False
        self.postfix = ""

    def update(self, n: int = 1) -> None:
        self.n += n
        self.postfix = ""   # (a step ended: its phase is over)
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._last = now
            self._print(now)

    def skip(self, n: int) -> None:
        """``n`` steps done before this display started: counted, not in the rate."""
        self.n += n
        self._initial += n

    def set_postfix_str(self, text: str, refresh: bool = True) -> None:
        """The phase now running (tqdm's postfix): shown in the lines, and a line when a phase starts ``interval``
        seconds or more after the last one, so a long epoch of a large model says what it is doing."""
        self.postfix = text
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._last = now
            self._print(now)

    def close(self) -> None:
        short = self.quiet_when_short and not self._printed and time.monotonic() - self._start < self.interval
        if not self._closed and self.n > self._initial and not short:  # (nothing done, e.g. a cached warm start)
            self._print(time.monotonic())
        self._closed = True

    def _print(self, now: float) -> None:
        elapsed = now - self._start
        done = self.n - self._initial
        left = (self.total - self.n) * elapsed / done if done > 0 else None
        pct = 100.0 * self.n / self.total if self.total else 100.0
        text = f"{self.desc}: {self.n}/{self.total} ({pct:.0f}%), {elapsed:.0f} s"
        if left is not None and self.n < self.total:
            text += f", ~{left:.0f} s left"
        if self.postfix and self.n < self.total:
            text += f" [{self.postfix}]"
        print(text, file=self.stream, flush=True)
        self._printed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
