"""What the simulator is paid for each generation, in one place: the paper's quantities and the pg update's reward.

The paper's (Eqs. 2-3): a task's empirical success p_hat over its rollouts (:func:`success_rate`), the
alpha-curriculum reward R_env = exp(-beta (p_hat - alpha)^2) (:func:`alpha_reward`) and the band |p_hat - alpha|
<= k_min that decides which generations reward-weighted regression keeps (:func:`in_band`, :func:`rwr_weights`).
:func:`scored` puts them on an epoch's candidates (an invalid or never rolled-out generation: R_env 0, out of band).

Beyond the paper, the policy-gradient update (``env.update=pg``, :mod:`genenv.algos.env_pg`) pays each generation
:func:`challenger_rewards`: a valid task what the run's signal says (by default R_env rescaled to [0, 1],
:func:`frontier_reward`), what the signal says an invalid one earns (0), and 0 for a valid task that a gate
shuts out (:mod:`genenv.signals`: :func:`level_gate` over :func:`open_levels` for the level gate). The per-level
statistics the level gate shares with the oracle curriculum are here too (:func:`level_success`).
Pure functions, unit-tested against hand-computed values (tests/test_reward.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from genenv.pool import TaskPool


def success_rate(rewards, success_threshold: float = 1.0) -> float:
    """Empirical success p_hat = k / n of a group of rollout rewards (paper Eq. 2); a rollout succeeds when its
    reward is >= ``success_threshold``."""
    values = np.asarray(rewards, dtype=float).ravel()
    size, successes = values.size, float(np.sum(values >= success_threshold))
    if size == 0:
        raise ValueError("success_rate needs at least one reward")
    return successes / size


def alpha_reward(p_hat, alpha: float = 0.5, beta: float = 2.0):
    """The alpha-curriculum reward R_env = exp(-beta (p_hat - alpha)^2) (paper Eq. 3). Vectorised."""
    p_hat = np.asarray(p_hat, dtype=float)
    reward = np.exp(-beta * (p_hat - alpha) ** 2)
    return float(reward) if reward.ndim == 0 else reward


def frontier_reward(r_env, alpha: float = 0.5, beta: float = 2.0):
    """R_env rescaled to [0, 1] over p_hat in [0, 1]: 0 for the p_hat furthest from alpha (a task always solved
    or always failed when alpha = 0.5), 1 at alpha. The same ordering as R_env without its floor
    exp(-beta max(alpha, 1 - alpha)^2) (0.61 at the paper's beta = 2), so that a useless valid task is worth what
    an invalid one is, not 61% of an ideal one. All zeros when beta = 0 (R_env is flat). Vectorised."""
    r_env = np.asarray(r_env, dtype=float)
    floor = float(np.exp(-beta * max(alpha, 1.0 - alpha) ** 2))
    if floor >= 1.0:
        reward = np.zeros_like(r_env)
    else:
        reward = np.clip((r_env - floor) / (1.0 - floor), 0.0, 1.0)
    return float(reward) if reward.ndim == 0 else reward


def in_band(p_hat, alpha: float = 0.5, k_min: float = 0.1):
    """True where |p_hat - alpha| <= k_min: the batches the simulator may learn from."""
    p_hat = np.asarray(p_hat, dtype=float)
    inside = np.abs(p_hat - alpha) <= k_min + 1e-12
    return bool(inside) if inside.ndim == 0 else inside


def rwr_weights(r_env, lam: float = 1.0):
    """Reward-weighted-regression weights exp(lam * R_env), normalised to sum to one.

    Computed with the maximum subtracted first so that large ``lam`` never overflows.
    """
    r_env = np.asarray(r_env, dtype=float).ravel()
    if r_env.size == 0:
        return r_env
    logits = lam * r_env
    weights = np.exp(logits - logits.max())
    return weights / weights.sum()


# ----- an epoch's candidates: p_hat, R_env, the band (the paper) ---------------------------------------------


def scored(candidates: list, *, alpha: float, beta: float, k_min: float, success_threshold: float,
           p_hat_level: str) -> list:
    """p_hat per task and per seed batch (``p_hat_level``, each :func:`success_rate`), then R_env
    and the in-band flag (invalid or not rolled out: R_env 0), on an epoch's :class:`genenv.generation.Candidate`
    list (not imported: generation.py imports this module)."""
    successes_by_batch: dict[int, list[float]] = {}
    p_hat_task = []
    for c in candidates:
        p = None
        if c.valid and c.episodes:
            rewards = [e.reward for e in c.episodes]
            p = success_rate(rewards, success_threshold)
            successes_by_batch.setdefault(c.batch, []).extend(rewards)
        p_hat_task.append(p)
    by_batch: dict[int, float] = {}   # a batch's p_hat, computed once for its members
    out = []
    for c, p_task in zip(candidates, p_hat_task):
        if p_task is None:
            out.append(c)
            continue
        if p_hat_level != "batch":
            p = p_task
        elif c.batch in by_batch:
            p = by_batch[c.batch]
        else:
            p = by_batch[c.batch] = success_rate(successes_by_batch[c.batch], success_threshold)
        out.append(c.updated(p_hat_task=p_task, p_hat=p, r_env=alpha_reward(p, alpha, beta),
                             in_band=in_band(p, alpha, k_min)))
    return out


# ----- the pg update's reward (beyond the paper) --------------------------------------------------------------

def challenger_rewards(candidates, valid_reward: Callable, gate: Callable | None = None) -> list[float]:
    """The pg reward of each generation: ``valid_reward(c)`` for a valid task (the run's signal: the paper's,
    :class:`genenv.signals.AlphaSignal`, pays :func:`frontier_reward` of its R_env), 0 for one the domain rejected.
    With ``gate`` (a predicate on a candidate: :func:`level_gate`), a valid task it shuts out earns 0, what a useless
    valid task earns."""
    return [float(valid_reward(c)) if c.valid and (gate is None or gate(c)) else 0.0 for c in candidates]


def rescaled(alpha: float = 0.5, beta: float = 2.0) -> Callable:
    """A candidate's R_env rescaled by :func:`frontier_reward` (the default signal's reward, for tests and tools)."""
    return lambda c: float(frontier_reward(c.r_env, alpha, beta))


@dataclass(frozen=True)
class LevelSuccess:
    """A level's recent tasks: their mean last p_hat and the share of them in the band."""
    mean: float
    band_share: float


def level_success(pool: TaskPool, levels: list[int], window: int, alpha: float = 0.5,
                  k_min: float = 0.25) -> dict[int, LevelSuccess | None]:
    """Per level, over the ``window`` most recently added pool tasks of that level that have been rolled out: the
    mean of their last p_hat and the share of them in the band (None: none has been rolled out). Read by the level
    gate and by the oracle curriculum (:mod:`genenv.curricula`)."""
    by_level = pool.indices_by_level()
    return group_success(pool, {level: by_level.get(level, []) for level in levels}, window, alpha, k_min)


def group_success(pool: TaskPool, groups: dict[int, list[int]], window: int, alpha: float = 0.5,
                  k_min: float = 0.25) -> dict[int, LevelSuccess | None]:
    """:func:`level_success` over any grouping of the pool's entries (each group's indices in the order they
    joined): per group, the mean last p_hat and band share of its ``window`` most recent rolled-out members."""
    recent: dict[int, list[float]] = {key: [] for key in groups}
    for key, rates in recent.items():
        for index in reversed(groups[key]):
            history = pool.entries[index].p_hat_history
            if history:
                rates.append(history[-1])
                if len(rates) == window:
                    break
    return {key: LevelSuccess(float(np.mean(rates)), float(np.mean(in_band(np.array(rates), alpha, k_min))))
            if rates else None for key, rates in recent.items()}


def open_levels(stats: dict, mastered: float) -> set[int]:
    """The levels the agent has not mastered, from :func:`level_success` statistics over the domain's levels: a
    level whose recent mean success is below ``mastered`` or that has never been rolled out (its first tasks are
    paid); when every level is mastered, the hardest one (as the oracle's frontier rule falls back)."""
    if not stats:
        return set()
    levels = {level for level, stat in stats.items() if stat is None or stat.mean < mastered}
    return levels or {max(stats)}


def level_gate(levels: set[int]) -> Callable:
    """``env.pg.gate=levels`` (uses the domain's levels): a task may earn only on one of ``levels``."""
    return lambda c: c.parsed.level in levels
