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


# ---------------------------------------------------------------------------- per-sequence sampling randomness
# Every sampled sequence draws its tokens from uniforms of its own, computed from (phase seed, sequence key,
# step) by integer hashing: a sequence samples the same tokens whatever batch, shard or worker it is generated
# in, and the numbers are the same on every machine (integer arithmetic; no generator state).
_MASK64 = (1 << 64) - 1


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's output function on uint64 arrays (Steele, Lea & Flood 2014): a bijection whose outputs pass
    BigCrush; consecutive inputs give independent-looking outputs."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def sequence_keys(*parts) -> np.ndarray:
    """64-bit keys of sampled sequences from their coordinates, e.g. (task index, sample, turn): each part an int or
    an integer array (broadcast together); one uint64 per sequence."""
    key = np.zeros(np.broadcast_shapes(*(np.shape(p) for p in parts)), dtype=np.uint64)
    for part in parts:
        key = _splitmix64(key ^ np.asarray(part).astype(np.int64).astype(np.uint64))
    return key


def grid_keys(first_index: int, prompts: int, samples: int, *more) -> np.ndarray:
    """Keys of ``samples`` sequences for each of ``prompts`` consecutive prompts, the first being prompt
    ``first_index`` of its phase, in generate()'s order (prompt-major): (prompt index, sample, *more)."""
    return sequence_keys(first_index + np.repeat(np.arange(prompts), samples), np.tile(np.arange(samples), prompts),
                         *more)


def sequence_key(*parts: int) -> int:
    """One sequence's key (:func:`sequence_keys` of scalars)."""
    return int(sequence_keys(*parts))


def sequence_uniforms(seed: int, keys, steps: int) -> np.ndarray:
    """[len(keys), steps] float64 uniforms in [0, 1): row i is the randomness of the sequence keyed ``keys[i]``
    under the phase ``seed``, one number per generated token (53 random bits each)."""
    if not (isinstance(keys, np.ndarray) and keys.dtype == np.uint64):   # (np.asarray would turn big ints to floats)
        keys = np.array([int(k) & _MASK64 for k in keys], dtype=np.uint64)
    rows = _splitmix64(keys ^ _splitmix64(np.array([int(seed) & _MASK64], dtype=np.uint64)))
    counters = _splitmix64(np.arange(steps, dtype=np.uint64) + np.uint64(1))
    bits = _splitmix64(rows[:, None] ^ counters[None, :])
    return (bits >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))
