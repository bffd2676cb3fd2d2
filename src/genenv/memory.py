"""Resident memory of this process: its peak since the last reset (Linux), for per-phase memory profiles.

Linux keeps the peak resident set size (``VmHWM`` in ``/proc/self/status``) and resets it to the current size
when ``5`` is written to ``/proc/self/clear_refs``, so each phase of an epoch can report its own peak. Elsewhere
the reset is unavailable and the peak is the process's lifetime maximum (``resource.getrusage``), which is still
an upper bound.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


_descriptors: dict[Path, tuple[int, int]] = {}   # path -> (pid, descriptor): /proc/self is resolved when opened


def _descriptor(path: Path, flags: int) -> int:
    """A descriptor of ``path`` opened once per process and kept (the loop reads and resets memory before and
    after every phase of every epoch: opening the file each time was most of the cost). A forked child opens its
    own: the inherited one describes the parent."""
    kept = _descriptors.get(path)
    if kept is None or kept[0] != os.getpid():
        kept = _descriptors[path] = (os.getpid(), os.open(path, flags | os.O_CLOEXEC))
    return kept[1]


def reset_peak_rss() -> bool:
    """Start a new peak at the current resident size; False where the platform cannot (then peaks accumulate)."""
    try:
        os.write(_descriptor(_CLEAR_REFS, os.O_WRONLY), b"5")
        return True
    except OSError:
        return False


def _status_kib(field: str) -> int | None:
    """A ``kB`` field of /proc/self/status, read with one ``pread`` (a third of the cost of opening and decoding
    the file)."""
    try:
        text = os.pread(_descriptor(_STATUS, os.O_RDONLY), 1 << 14, 0)
        start = text.index(field.encode() + b":") + len(field) + 1
        return int(text[start:text.index(b"\n", start)].split()[0])
    except (OSError, ValueError, IndexError):
        return None


def peak_rss_bytes() -> int | None:
    """The peak resident set size since the last :func:`reset_peak_rss` (or since the process started)."""
    kib = _status_kib("VmHWM")
    if kib is not None:
        return kib * 1024
    try:
        import resource  # noqa: PLC0415 (Unix only)
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)  # bytes on macOS, KiB on Linux


def current_rss_bytes() -> int | None:
    """The resident set size now (Linux; None elsewhere)."""
    kib = _status_kib("VmRSS")
    return None if kib is None else kib * 1024
