"""The smaller options that lost their decision rule, each one registered strategy (their measurements are named in
:data:`genenv.experimental.EXPERIMENTS`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from genenv.config import knob
from genenv.experimental.sections import Experimental, replaces
from genenv.reward import alpha_reward, challenger_rewards
from genenv.signals import SEED_DRAWS, AlphaSignal, SeedDraw, Signal


@SEED_DRAWS.register("learnability")
class LearnabilitySeeds(Experimental, SeedDraw):
    """Seeds drawn with probability proportional to p (1 - p) of their last p_hat, floored at
    ``baseline.learnability_floor``, a task never rolled out counting as 0.5."""

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


@replaces("signal", "interior")
class InteriorSignal(Experimental, Signal):
    """R_env for a task the agent sometimes solves, 0 for one it always or never solves (meant for alpha < 0.5)."""

    def rewards(self, generated, gate):
        cr = self.cfg.curriculum_reward
        return challenger_rewards(generated, lambda c: float(interior_reward(c.p_hat, cr.alpha, cr.beta)), gate)


def repeated_generations(candidates, known: Callable[[str], bool]) -> Callable:
    """A predicate on ``candidates`` naming each valid generation whose task text was ``known`` before the epoch (in
    the pool) or was written by an earlier candidate of the list."""
    seen, repeated = set(), set()
    for c in candidates:
        if c.valid:
            if known(c.parsed.text) or c.parsed.text in seen:
                repeated.add(id(c))
            seen.add(c.parsed.text)
    return lambda c: id(c) in repeated


@dataclass
class PenaltyKnobs:
    """``experimental.signal=penalised``: what an invalid generation, and a repeat, earn."""
    invalid_reward: float = knob(0.0, "what an invalid generation earns, on the rescaled R_env scale where a task "
                                 "always solved or always failed earns 0 and one at alpha earns 1 (pilot F: -0.5)",
                                 lo=-1.0, hi=1.0)
    repeats: bool = knob(False, "a valid generation whose task is already in the pool, or was written earlier in the "
                         "same epoch, earns invalid_reward too")


@replaces("signal", "penalised")
class PenalisedSignal(Experimental, AlphaSignal):
    """The alpha signal, with an invalid generation earning ``experimental.penalised.invalid_reward`` and, with
    ``repeats``, a valid task that repeats one already known earning it too (the paper's information, no levels)."""
    knobs = PenaltyKnobs
    section = "penalised"

    def before_agent_update(self, domain, agent, state, generated, epoch):
        """What it pays a repeat by: whether a task text was in the pool before this epoch."""
        self.known = lambda text: state.task_pool.joined_before(text, epoch)
        return {}

    def rewards(self, generated, gate):
        repeat = repeated_generations(generated, self.known) if self.options.repeats else None
        return penalised_rewards(generated, self.paid, float(self.options.invalid_reward), gate, repeat)


def penalised_rewards(candidates, valid_reward: Callable, invalid_reward: float = 0.0, gate: Callable | None = None,
                      repeat: Callable | None = None) -> list[float]:
    """:func:`genenv.reward.challenger_rewards` with an invalid generation earning ``invalid_reward`` and, with
    ``repeat`` (a predicate: :func:`repeated_generations`), a valid task it names earning it too."""
    def reward(c) -> float:
        if repeat is not None and repeat(c):
            return float(invalid_reward)
        if gate is not None and not gate(c):
            return 0.0
        return float(valid_reward(c))
    return [reward(c) if c.valid else float(invalid_reward) for c in candidates]

