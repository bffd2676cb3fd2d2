"""The smaller options that lost their decision rule, each one registered strategy (their measurements are named in
:data:`genenv.experimental.EXPERIMENTS`)."""

from __future__ import annotations

import numpy as np

from genenv.reward import alpha_reward
from genenv.signals import (
    LEVEL_RULES,
    SEED_DRAWS,
    SIGNALS,
    SUCCESS_ESTIMATES,
    LevelRule,
    SeedDraw,
    Signal,
    SuccessEstimate,
)


@SEED_DRAWS.register("learnability")
class LearnabilitySeeds(SeedDraw):
    """Seeds drawn with probability proportional to p (1 - p) of their last p_hat, floored at
    ``baseline.learnability_floor``, a task never rolled out counting as 0.5."""
    experimental = True

    def draw(self, pool, rng, epoch):
        return pool.sample_by_learnability(rng, self.cfg.seeds_per_epoch, self.cfg.baseline.learnability_floor)


def interior_reward(p_hat, alpha: float = 0.5, beta: float = 2.0):
    """exp(-beta (p_hat - alpha)^2) for 0 < p_hat < 1 and 0 at p_hat = 0 or 1: R_env without its value at the
    ends, where a group of rollouts all fail or all succeed and carry no learning signal. With alpha = 0.5 it
    orders tasks like :func:`genenv.reward.frontier_reward`; with alpha < 0.5 it prefers tasks the agent mostly
    fails over tasks it mostly solves, without paying for tasks it never solves. Vectorised."""
    p_hat = np.asarray(p_hat, dtype=float)
    reward = np.where((p_hat > 0.0) & (p_hat < 1.0), alpha_reward(p_hat, alpha, beta), 0.0)
    return float(reward) if reward.ndim == 0 else reward


@SIGNALS.register("interior")
class InteriorSignal(Signal):
    """R_env for a task the agent sometimes solves, 0 for one it always or never solves (meant for alpha < 0.5)."""
    experimental = True

    def valid_reward(self, candidate):
        cr = self.cfg.curriculum_reward
        return float(interior_reward(candidate.p_hat, cr.alpha, cr.beta))


def posterior_success_rate(rewards, success_threshold: float = 1.0) -> float:
    """The Beta(1,1) posterior mean (k + 1) / (n + 2) of a group's successes, which never sits at 0 or 1."""
    values = np.asarray(rewards, dtype=float).ravel()
    if values.size == 0:
        raise ValueError("posterior_success_rate needs at least one reward")
    return (float(np.sum(values >= success_threshold)) + 1.0) / (values.size + 2.0)


@SUCCESS_ESTIMATES.register("posterior")
class PosteriorSuccess(SuccessEstimate):
    """Every p_hat the Beta(1,1) posterior mean instead of k / n."""
    experimental = True
    rate = staticmethod(posterior_success_rate)


@LEVEL_RULES.register("band")
class BandLevel(LevelRule):
    """The level with the largest share of recent tasks in the band; else (no level has one) the level whose mean is
    closest to alpha. Ties at random."""
    experimental = True

    @staticmethod
    def choose(stats, alpha, rng, mastered):
        levels = list(stats)
        shares = np.array([stats[lv].band_share for lv in levels])
        scores = shares if shares.max() > 0 else -np.array([abs(stats[lv].mean - alpha) for lv in levels])
        best = np.flatnonzero(scores == scores.max())
        return int(levels[best[rng.integers(len(best))]])
