"""A difficulty the pool learns from p_hat, with no domain levels (issue 37): ``env.pg.gate=predicted`` and
``env.seed_draw=predicted``, the best level-free arm before issue 55 and not adopted (issue 37's fresh seeds:
predicted gate + this seed draw minus random with the same draw +0.020 [-0.020, +0.065]); kept as issue 55's control.

Each task's text is turned into hashed character n-gram counts (n = 1-3, ``dims`` buckets, crc32: the same
buckets in every process); a ridge regression fit on the pool's most recently rolled-out tasks predicts the
agent's success from them. Where the level gate averages success over a domain's level, this averages it over
tasks that look alike, so one group's sampling noise on a task of a mastered kind does not count as the frontier.
Pure numpy; the feature vector of a text is computed once.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from genenv.config import knob
from genenv.experimental.sections import Experimental
from genenv.signals import GATES, SEED_DRAWS, Gate, SeedDraw, frontier_rule, frontier_seeds


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


def predicted_gate(pool, mastered: float, window: int):
    """``env.pg.gate=predicted`` (no domain levels), the pg gate: a valid task may earn unless the difficulty
    model, fit on the pool's ``window`` most recent rolled-out tasks, predicts its success at ``mastered`` or
    above (a task that looks like mastered ones does not pay)."""
    model = TextDifficulty().fit(*recent_outcomes(pool, window))
    return lambda c: not model.predict(c.parsed.text) >= mastered


def predicted_frontier_seeds(pool, n: int, rng: np.random.Generator, *, bins: int, fit_window: int,
                             alpha: float, k_min: float, window: int, exploration: float) -> list:
    """``env.seed_draw=predicted`` (no domain levels): :func:`genenv.signals.frontier_seeds` with learned
    levels. The difficulty model, fit on the pool's ``fit_window`` most recent rolled-out tasks' last p_hat,
    ranks every pool task by predicted success; the ranks are cut into ``bins`` equal groups, group 1 the easiest;
    the frontier rule picks a group from each group's recent mean success (its ``window`` latest rolled-out
    members) and a seed is drawn uniformly from it. Before any task has been rolled out there is nothing to fit:
    a uniform draw."""
    texts, rates = recent_outcomes(pool, fit_window)
    if not texts:
        return pool.sample(rng, n)
    return frontier_seeds(pool, n, rng, alpha=alpha, k_min=k_min, window=window, exploration=exploration,
                          groups=predicted_bins(pool, TextDifficulty().fit(texts, rates), bins))


# ----- the registered gate and seed draw (env.pg.gate=predicted, env.seed_draw=predicted) --------------------

@dataclass
class PredictedGateKnobs:
    """``env.pg.gate=predicted``."""
    window: int = knob(1024, "the most recently added rolled-out pool tasks the difficulty model is fit on", lo=16)


@dataclass
class PredictedSeedsKnobs:
    """``env.seed_draw=predicted``."""
    bins: int = knob(4, "equal groups of predicted success standing in for levels", lo=1)
    window: int = knob(1024, "the most recently added rolled-out pool tasks the difficulty model is fit on", lo=16)


@GATES.register("predicted")
class PredictedGate(Experimental, Gate):
    """A valid task may earn only if its success, predicted from its text, is below ``env.pg.gate_mastered``."""
    knobs, section = PredictedGateKnobs, "predicted_gate"

    def predicate(self, domain, pool):
        return predicted_gate(pool, self.cfg.env.pg.gate_mastered, self.options.window)


@SEED_DRAWS.register("predicted")
class PredictedSeeds(Experimental, SeedDraw):
    """The frontier seed draw over learned levels (:func:`predicted_frontier_seeds`)."""
    knobs, section = PredictedSeedsKnobs, "predicted_seeds"

    def draw(self, pool, rng, epoch):
        return predicted_frontier_seeds(pool, self.cfg.seeds_per_epoch, rng, bins=self.options.bins,
                                        fit_window=self.options.window, **frontier_rule(self.cfg))
