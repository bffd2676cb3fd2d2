"""The simulator's update rules (phase 7 of :mod:`genenv.coevolve`), by ``env.update``: each made once per epoch,
with the signal it pays (its hook read by the loop before the agent's update) and its optimiser steps on the
epoch's generations. The loop computes what every generation earns (:mod:`genenv.reward`, the signal); a rule
only turns those rewards into steps."""

from __future__ import annotations

import numpy as np

from genenv.algos.env_pg import pg_update, reward_groups
from genenv.algos.rwr import WeightedExample, rwr_update
from genenv.config import RunConfig
from genenv.domains.base import Domain
from genenv.generation import Candidate
from genenv.players import Players, RunState
from genenv.pool import EnvExample, TaskPool
from genenv.reward import rwr_weights
from genenv.signals import GATES, AlphaSignal, part


def select_env_batch(generated: list[Candidate], epoch: int) -> list[EnvExample]:
    """RWR's set: the in-band valid generations, each with its R_env (turned into exp(lam R_env) weights)."""
    return [EnvExample(g.context, g.prompt_ids, g.token_ids, float(g.r_env), epoch)
            for g in generated if g.valid and g.in_band and g.token_ids]


def simulator_gate(cfg: RunConfig, domain: Domain, pool: TaskPool):
    """The predicate on which valid generations may earn the pg reward (None: all), read after this epoch's
    rollouts joined the pool: the gate ``env.pg.gate`` (:data:`genenv.signals.GATES`)."""
    return GATES.make(cfg).predicate(domain, pool)


class SimulatorUpdate:
    """Phase 7's rule, made each epoch: the signal it pays (``signal``, whose hook the loop calls before the agent's
    update) and its optimiser steps on the epoch's generations (:meth:`step`; None: nothing to learn from). This
    base is a simulator that is not trained (a curriculum that trains none): the paper's signal, whose hook reads
    nothing, and no step."""

    def __init__(self, cfg: RunConfig):
        self.cfg, self.signal = cfg, AlphaSignal(cfg)

    def step(self, domain: Domain, players: Players, state: RunState, generated: list[Candidate], epoch: int,
             rng: np.random.Generator) -> dict | None:
        return None


class PolicyGradientUpdate(SimulatorUpdate):
    """``env.update=pg`` (beyond the paper): policy gradient on every generation's reward (the signal's: the paper's
    alpha signal, :class:`genenv.signals.AlphaSignal`, or the one an experiment puts in its place,
    :func:`genenv.signals.part`), its seed group's mean subtracted, for the generations the gate lets earn
    (:func:`simulator_gate`; the others earn what a useless task earns)."""

    def __init__(self, cfg: RunConfig):
        super().__init__(cfg)
        self.signal = part(cfg, "signal")(cfg)

    def step(self, domain, players, state, generated, epoch, rng):
        ec = self.cfg.env
        rewards = self.signal.rewards(generated, simulator_gate(self.cfg, domain, state.task_pool))
        groups = reward_groups(generated, rewards)   # the update receives the rewards; it never scores
        return pg_update(players.env, players.env_ref, players.env_opt, groups, steps=ec.pg.steps,
                         minibatch_groups=ec.pg.minibatch_groups, clip_eps=ec.pg.clip_eps, kl_coef=ec.kl_coef,
                         max_kl=ec.max_kl, grad_clip=self.cfg.grad_clip, temperature=ec.temperature, rng=rng,
                         recompute_old_logprobs=players.env.sampler is not None,
                         constraint=players.env_constraint)


class RewardWeightedRegression(SimulatorUpdate):
    """``env.update=rwr`` (the paper): reward-weighted regression toward the in-band generations, weights
    exp(lam R_env), with ``env.rwr.pool_replay`` also earlier epochs' sets from D_env, where this epoch's set is kept
    (D_env is this rule's memory: the pg rule keeps none). Its reward is R_env itself: the paper's signal."""

    def step(self, domain, players, state, generated, epoch, rng):
        cfg, ec = self.cfg, self.cfg.env
        selected = select_env_batch(generated, epoch)
        if not selected:
            return None
        examples, older = list(selected), state.env_pool.before(epoch)
        state.env_pool.extend(selected)
        if ec.rwr.pool_replay > 0 and older:
            extra = (int(round(len(selected) * ec.rwr.pool_replay / (1 - ec.rwr.pool_replay)))
                     if ec.rwr.pool_replay < 1 else len(older))
            examples += [older[i] for i in rng.choice(len(older), size=min(extra, len(older)), replace=False)]
        weights = rwr_weights([e.r_env for e in examples], cfg.curriculum_reward.lam)
        weighted = [WeightedExample(e.prompt_ids, e.target_ids, float(w)) for e, w in zip(examples, weights)]
        return rwr_update(players.env, players.env_ref, players.env_opt, weighted, steps=ec.rwr.steps,
                          batch_size=ec.rwr.batch, kl_coef=ec.kl_coef, max_kl=ec.max_kl, grad_clip=cfg.grad_clip,
                          rng=rng, constraint=players.env_constraint)


# the simulator's update rules by ``env.update``
SIMULATOR_UPDATES = {"pg": PolicyGradientUpdate, "rwr": RewardWeightedRegression}
