"""Levels the pool learns, with no domain levels (issue 37; the main path's since issue 88): each task's text as
hashed character n-gram counts (n = 1-3, ``dims`` buckets, crc32: the same buckets in every process), and a ridge
regression fit on the pool's most recently rolled-out tasks predicting the agent's success from them. Ranked by
predicted success and cut into equal groups, the pool's tasks stand in for a domain's difficulty levels: where a
level averages success over a domain's level, a group averages it over tasks that look alike.

``env.seed_draw=learnt_frontier`` draws each epoch's seeds from these groups by the oracle's frontier rule
(:func:`learnt_levels`, :class:`genenv.signals.LearntFrontierSeeds`). The untrained simulator with this draw led
the uniform draw by +0.080 dev success over 24 fresh seeds at 600 epochs on addition with its levels hidden
(docs/results.md). Pure numpy; the feature vector of a text is computed once.
"""

from __future__ import annotations

import zlib
from functools import lru_cache

import numpy as np


@lru_cache(maxsize=1 << 16)   # a task's vector is computed once per process (pools replay the same texts)
def ngram_features(text: str, dims: int = 512, orders: tuple[int, ...] = (1, 2, 3)) -> np.ndarray:
    """Counts of the text's character n-grams in ``dims`` hashed buckets, scaled to unit length (a long text
    and a short one of the same kind look alike)."""
    vector = np.zeros(dims)
    data = text.encode("utf-8", "replace")
    for n in orders:
        for i in range(len(data) - n + 1):
            vector[zlib.crc32(data[i:i + n]) % dims] += 1.0
    norm = np.linalg.norm(vector)
    return vector / norm if norm > 0 else vector


def fit_ridge(features: np.ndarray, targets: np.ndarray, l2: float = 1.0) -> tuple[np.ndarray, float]:
    """Weights and intercept minimising ||X w + b - y||^2 + l2 ||w||^2 (the intercept not penalised)."""
    mean_x, mean_y = features.mean(0), float(targets.mean())
    centred = features - mean_x
    gram = centred.T @ centred + l2 * np.eye(features.shape[1])
    weights = np.linalg.solve(gram, centred.T @ (targets - mean_y))
    return weights, mean_y - float(mean_x @ weights)


class TextDifficulty:
    """Predicted success of a task from its text, fit on (text, last p_hat) pairs."""

    def __init__(self, dims: int = 512, l2: float = 1.0):
        self.dims, self.l2 = dims, l2
        self.weights: np.ndarray | None = None
        self.intercept = 0.0

    def features(self, text: str) -> np.ndarray:
        return ngram_features(text, self.dims)

    def fit(self, texts: list[str], successes: list[float]) -> TextDifficulty:
        if texts:
            self.weights, self.intercept = fit_ridge(np.stack([self.features(t) for t in texts]),
                                                     np.asarray(successes, dtype=float), self.l2)
        return self

    def predict(self, text: str) -> float:
        """Predicted success; NaN before any fit."""
        if self.weights is None:
            return float("nan")
        return float(self.features(text) @ self.weights + self.intercept)


def recent_outcomes(pool, window: int) -> tuple[list[str], list[float]]:
    """The texts and last p_hat of the ``window`` most recently added pool tasks that have been rolled out."""
    texts, rates = [], []
    for entry in reversed(pool.entries):
        if entry.p_hat_history:
            texts.append(entry.task.text)
            rates.append(entry.p_hat_history[-1])
            if len(texts) == window:
                break
    return texts, rates


def predicted_bins(pool, model: TextDifficulty, bins: int) -> dict[int, list[int]]:
    """The pool's entries split into ``bins`` groups of (nearly) equal size by ``model``'s predicted success,
    group 1 the easiest (highest prediction, ties in pool order): learned stand-ins for a domain's difficulty
    levels. Each group's indices are in the order the tasks joined, as :meth:`TaskPool.indices_by_level` gives a
    level's."""
    if not pool.entries or model.weights is None:
        return {}
    features = np.stack([model.features(entry.task.text) for entry in pool.entries])
    predicted = features @ model.weights + model.intercept
    order = np.argsort(-predicted, kind="stable")
    chunks = [chunk for chunk in np.array_split(order, min(bins, len(order))) if len(chunk)]
    return {rank + 1: sorted(int(i) for i in chunk) for rank, chunk in enumerate(chunks)}


def learnt_levels(pool, bins: int, window: int) -> dict[int, list[int]] | None:
    """The pool's tasks in ``bins`` groups of (nearly) equal size by the success a difficulty model predicts for
    them (:func:`predicted_bins`), the model fit on the last p_hat of the pool's ``window`` most recently added
    rolled-out tasks; group 1 the easiest. None before any task has been rolled out (nothing to fit)."""
    texts, rates = recent_outcomes(pool, window)
    if not texts:
        return None
    return predicted_bins(pool, TextDifficulty().fit(texts, rates), bins)
