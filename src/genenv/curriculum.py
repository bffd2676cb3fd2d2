"""The curriculum math of GenEnv: pure numpy functions, unit-tested against hand-computed values."""

from __future__ import annotations

import numpy as np


def success_rate(rewards, success_threshold: float = 1.0, posterior: bool = False) -> float:
    """Empirical success p_hat = k / n of a group of rollout rewards (paper Eq. 2).

    A rollout succeeds when its reward is >= ``success_threshold``. With ``posterior`` the Beta(1,1)
    posterior mean (k + 1) / (n + 2) is returned instead, which never sits exactly at 0 or 1.
    """
    if isinstance(rewards, (list, tuple)) and all(isinstance(r, (float, int)) for r in rewards):
        # a plain list of numbers (every group of rollouts, hundreds an epoch): counted without numpy's
        # per-call cost; the count is exact, so the quotient is the same float
        size, successes = len(rewards), float(sum(r >= success_threshold for r in rewards))
    else:
        values = np.asarray(rewards, dtype=float).ravel()
        size, successes = values.size, float(np.sum(values >= success_threshold))
    if size == 0:
        raise ValueError("success_rate needs at least one reward")
    if posterior:
        return (successes + 1.0) / (size + 2.0)
    return successes / size


def alpha_reward(p_hat, alpha: float = 0.5, beta: float = 2.0):
    """The alpha-curriculum reward R_env = exp(-beta (p_hat - alpha)^2) (paper Eq. 3). Vectorised."""
    if isinstance(p_hat, float):  # one task's p_hat without building an array: the same arithmetic (numpy
        # squares a 0-d array with C's pow, as Python's ** does; gap * gap rounds differently in rare cases)
        return float(np.exp(-beta * (p_hat - alpha) ** 2))
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


def interior_reward(p_hat, alpha: float = 0.5, beta: float = 2.0):
    """exp(-beta (p_hat - alpha)^2) for 0 < p_hat < 1 and 0 at p_hat = 0 or 1: R_env without its value at the
    ends, where a group of rollouts all fail or all succeed and carry no learning signal. With alpha = 0.5 it
    orders tasks like :func:`frontier_reward`; with alpha < 0.5 it prefers tasks the agent mostly fails over
    tasks it mostly solves, without paying for tasks it never solves (R_env with alpha < 0.5 does: a
    simulator then drifts to impossible tasks, measured in docs/results-log.md). Vectorised."""
    p_hat = np.asarray(p_hat, dtype=float)
    reward = np.where((p_hat > 0.0) & (p_hat < 1.0), alpha_reward(p_hat, alpha, beta), 0.0)
    return float(reward) if reward.ndim == 0 else reward


def in_band(p_hat, alpha: float = 0.5, k_min: float = 0.1):
    """True where |p_hat - alpha| <= k_min: the batches the simulator may learn from."""
    if isinstance(p_hat, float):
        return abs(p_hat - alpha) <= k_min + 1e-12
    p_hat = np.asarray(p_hat, dtype=float)
    inside = np.abs(p_hat - alpha) <= k_min + 1e-12
    return bool(inside) if inside.ndim == 0 else inside


def rwr_weights(r_env, lam: float = 1.0, normalize: bool = True):
    """Reward-weighted-regression weights exp(lam * R_env), normalised to sum to one by default.

    Computed with the maximum subtracted first so that large ``lam`` never overflows.
    """
    r_env = np.asarray(r_env, dtype=float).ravel()
    if r_env.size == 0:
        return r_env
    logits = lam * r_env
    weights = np.exp(logits - logits.max())
    if normalize:
        return weights / weights.sum()
    return weights * np.exp(logits.max())


def learning_signal(p_hat):
    """p (1 - p): the variance of a Bernoulli reward, proportional to the REINFORCE signal (Prop. 1)."""
    p_hat = np.asarray(p_hat, dtype=float)
    value = p_hat * (1.0 - p_hat)
    return float(value) if value.ndim == 0 else value
