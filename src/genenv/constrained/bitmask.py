"""Token bitmasks as llguidance writes them (bit ``t % 32`` of int32 word ``t // 32``: token ``t`` allowed), read and
written as uint32 words. Pure numpy: what the grammar, the references scan and the closing share."""

from __future__ import annotations

import numpy as np


def words_of(ids, width: int) -> np.ndarray:
    """The ``width`` bitmask words (uint32) that allow exactly the tokens ``ids``."""
    ids = np.asarray(ids, dtype=np.int64)
    words = np.zeros(width, dtype=np.uint32)
    np.bitwise_or.at(words, ids >> 5, np.left_shift(np.uint32(1), (ids & 31).astype(np.uint32)))
    return words


def bits_of(words: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Which of ``ids`` a bitmask row (as uint32 words) allows."""
    return ((words[ids >> 5] >> (ids & 31).astype(np.uint32)) & 1).astype(bool)
