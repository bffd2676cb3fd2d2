"""Named random streams: one run ``seed`` fixes every one of them.

A stream's seed is a hash of the run seed and the stream's names, so streams are independent of each other
and of the order in which they are used (a resumed run or a sharded batch draws the same numbers).
"""

from __future__ import annotations

import hashlib

import numpy as np


def stream_seed(seed: int, *names: str) -> int:
    """A 32-bit seed for the stream ``names`` of a run (warm starts, seed tasks, ...)."""
    digest = hashlib.sha256(("/".join(names) + f"/{seed}").encode()).digest()
    return int.from_bytes(digest[:4], "little")


def phase_seed(seed: int, epoch: int, phase: str) -> int:
    """A 32-bit seed for one phase of one epoch of the co-evolution loop."""
    digest = hashlib.sha256(f"{seed}/{epoch}/{phase}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


def phase_rng(seed: int, epoch: int, phase: str) -> np.random.Generator:
    return np.random.default_rng(phase_seed(seed, epoch, phase))
