"""Learning progress over clusters of tasks (issue 55's signal (b), ``experimental.signal=learning_progress`` and
``env.seed_draw=progress``): pay the simulator, or point its seeds, where the agent's success is changing.

Learning-progress curricula (TSCL, ALP-GMM, MAGELLAN) pay |change in success| per cluster of tasks rather than
closeness to a target rate: a cluster the agent has mastered and one it cannot learn both have flat success and
earn nothing, where R_env pays a task at p_hat 0 and one at 1 alike only when they sit at alpha. Here, with the
paper's information only (task texts and p_hat, no domain levels):

1. The window: the pool's last ``window`` p_hat observations (every rollout group of a valid generated task or a
   replayed pool task records one, oldest first; :attr:`genenv.pool.TaskPool.outcomes`).
2. Clusters: k-means (``scipy.cluster.vq.kmeans2``, k-means++ start, the epoch's own seed, 10 iterations) on the
   character n-gram vectors (:func:`genenv.text_difficulty.ngram_features`) of the window's distinct task
   texts, ``clusters`` groups, fit afresh each epoch (a cluster is "tasks that look alike now", no identity kept
   across epochs, so nothing to checkpoint: the pool's observations rebuild it on resume).
3. Progress of a cluster: its observations in the window in order, split in an older and a newer half,
   ``|mean(newer) - mean(older)|``. Fewer than ``2 * min_count`` observations: unmeasured, and it counts as the
   most progressing (a new kind of task is explored, as a level never rolled out is open).
4. The simulator's reward (``learning_progress``): a valid task earns its nearest cluster's progress divided by
   the epoch's largest, in [0, 1]. The seed draw (``progress``, the untrained simulator given the same
   information): a cluster with probability ``(1 - exploration) * progress / sum + exploration / clusters``, then a
   uniform task of the window's that belong to it.

No model calls: the cost is the k-means (inside the ``agent_update`` and ``generate`` phases' seconds).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy.cluster.vq import kmeans2

from genenv.config import knob
from genenv.experimental.credit import CreditSignal
from genenv.experimental.sections import Experimental, replaces
from genenv.seeding import phase_seed
from genenv.signals import SEED_DRAWS, SeedDraw
from genenv.text_difficulty import ngram_features


def window_observations(pool, window: int) -> tuple[list[int], list[float]]:
    """The pool entries and p_hat of its last ``window`` observations, oldest first."""
    recent = pool.outcomes[-window:] if window > 0 else []
    return [i for i, _ in recent], [p for _, p in recent]


def half_progress(labels: np.ndarray, outcomes: np.ndarray, clusters: int, min_count: int) -> np.ndarray:
    """Per cluster, ``|mean(newer half) - mean(older half)|`` of its outcomes in order (an odd count: the middle
    one in the newer half); NaN where it has fewer than ``2 * min_count``."""
    progress = np.full(clusters, np.nan)
    for c in range(clusters):
        mine = outcomes[labels == c]
        if len(mine) >= 2 * min_count and len(mine) >= 2:
            half = len(mine) // 2
            progress[c] = abs(float(mine[half:].mean()) - float(mine[:half].mean()))
    return progress


def filled(progress: np.ndarray) -> np.ndarray:
    """Unmeasured clusters (NaN) count as the most progressing of the measured ones (1 when none is measured or
    none progresses: every cluster then weighs the same)."""
    measured = progress[np.isfinite(progress)]
    top = float(measured.max()) if measured.size and measured.max() > 0 else 1.0
    return np.where(np.isfinite(progress), progress, top)


@dataclass
class ClusterProgress:
    """One epoch's clusters of the window's tasks and each cluster's learning progress."""
    centroids: np.ndarray          # (clusters, dims)
    tasks: list                    # the window's distinct tasks, in order of first observation
    labels: np.ndarray             # cluster of each of ``tasks``
    progress: np.ndarray           # per cluster, NaN where unmeasured

    def cluster_of(self, text: str) -> int:
        """The nearest centroid of a task text (Euclidean, the first on ties)."""
        distances = ((self.centroids - ngram_features(text)) ** 2).sum(1)
        return int(np.argmin(distances))

    def rewards(self, texts: list[str]) -> list[float]:
        """Each text's cluster progress divided by the largest (unmeasured clusters count as the largest)."""
        weights = filled(self.progress)
        top = float(weights.max()) if weights.size else 0.0
        return [float(weights[self.cluster_of(t)] / top) if top > 0 else 0.0 for t in texts]


_LAST: list = [None, None]   # (key, result) of the last call: the seed draw and the reward of an epoch share one fit


def cluster_progress(pool, seed: int, *, clusters: int, window: int, min_count: int) -> ClusterProgress | None:
    """The epoch's :class:`ClusterProgress` (None before the pool has any observation); k-means starts from
    ``seed``. The same pool state and arguments give the same result, computed once."""
    key = (id(pool), len(pool.entries), len(pool.outcomes), seed, clusters, window, min_count)
    if _LAST[0] != key:
        _LAST[:] = [key, _cluster_progress(pool, seed, clusters, window, min_count)]
    return _LAST[1]


def _cluster_progress(pool, seed: int, clusters: int, window: int, min_count: int) -> ClusterProgress | None:
    indices, outcomes = window_observations(pool, window)
    if not indices:
        return None
    order = list(dict.fromkeys(indices))                     # distinct entries, in order of first observation
    position = {entry: k for k, entry in enumerate(order)}
    tasks = [pool.entries[i].task for i in order]
    features = np.stack([ngram_features(t.text) for t in tasks])
    k = min(clusters, len(tasks))
    with warnings.catch_warnings():   # an empty cluster keeps its centroid: no window task is nearest to it
        warnings.simplefilter("ignore", UserWarning)
        centroids, text_labels = kmeans2(features, k, iter=10, minit="++", seed=np.random.default_rng(seed))
    labels = text_labels[[position[i] for i in indices]]
    return ClusterProgress(centroids, tasks, text_labels,
                           half_progress(labels, np.asarray(outcomes, dtype=float), k, min_count))


def progress_seeds(pool, n: int, rng: np.random.Generator, *, cluster_seed: int, clusters: int, window: int,
                   min_count: int, exploration: float) -> list:
    """``env.seed_draw=progress``: ``n`` seed tasks, each from a cluster drawn by its learning progress (with
    ``exploration`` a uniform cluster), uniformly among the window's tasks of that cluster. Before any observation,
    the pool's uniform draw."""
    found = cluster_progress(pool, cluster_seed, clusters=clusters, window=window, min_count=min_count)
    if found is None or n <= 0:
        return pool.sample(rng, n)
    weights = filled(found.progress)
    k = len(weights)
    share = weights / weights.sum() if weights.sum() > 0 else np.full(k, 1.0 / k)
    chance = (1.0 - exploration) * share + exploration / k
    members = {c: np.flatnonzero(found.labels == c) for c in range(k)}
    nonempty = np.array([len(members[c]) > 0 for c in range(k)])
    chance = np.where(nonempty, chance, 0.0)
    chance = chance / chance.sum()
    seeds = []
    for _ in range(n):
        c = int(rng.choice(k, p=chance))
        seeds.append(found.tasks[int(members[c][rng.integers(len(members[c]))])])
    return seeds


# ----- the signal and the seed draw (experimental.signal=learning_progress, env.seed_draw=progress) --------------

@dataclass
class ProgressKnobs:
    """Learning progress over clusters of tasks, read by ``experimental.signal=learning_progress`` and
    ``env.seed_draw=progress``. Values fixed before any run, not tuned."""
    clusters: int = knob(8, "k-means clusters of the window's task texts (character n-gram vectors), fit each epoch",
                         lo=1)
    window: int = knob(2048, "the pool's last this many p_hat observations are clustered; a cluster's progress is "
                       "|mean of its newer half - mean of its older half|", lo=2)
    min_count: int = knob(16, "a cluster with fewer than twice this many observations in the window is unmeasured "
                          "and counts as the most progressing (explored first)", lo=1)
    exploration: float = knob(0.2, "seed_draw=progress: chance of a uniform cluster instead of one drawn by its "
                              "progress", lo=0.0, hi=1.0)


@replaces("signal", "learning_progress")
class LearningProgressSignal(CreditSignal):
    """A valid task earns the learning progress of its cluster of look-alike pool tasks, scaled by the epoch's
    largest into [0, 1] (no model calls)."""
    knobs, section = ProgressKnobs, "progress"

    def credit_rewards(self, domain, agent, state, valid, epoch, stats):
        lp = self.options
        found = cluster_progress(state.task_pool, phase_seed(self.cfg.seed, epoch, "progress"), clusters=lp.clusters,
                                 window=lp.window, min_count=lp.min_count)
        return found.rewards([c.parsed.text for c in valid]) if found else [1.0] * len(valid)


@SEED_DRAWS.register("progress")
class ProgressSeeds(Experimental, SeedDraw):
    """Each seed from a cluster of look-alike tasks drawn by its learning progress (:func:`progress_seeds`)."""
    knobs, section = ProgressKnobs, "progress"

    def draw(self, pool, rng, epoch):
        lp = self.options
        return progress_seeds(pool, self.cfg.seeds_per_epoch, rng, cluster_seed=phase_seed(self.cfg.seed, epoch,
                              "progress"), clusters=lp.clusters, window=lp.window, min_count=lp.min_count,
                              exploration=lp.exploration)
