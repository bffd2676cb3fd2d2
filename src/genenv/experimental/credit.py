"""The base of the experimental signals that read the agent before its update (issue 55): their hook,
:meth:`genenv.signals.Signal.before_agent_update`, computes a reward for each valid, rolled-out generation, which
the signal keeps and its :meth:`rewards` then pays, and reports the ``teacher_*`` metrics."""

from __future__ import annotations

import abc

from genenv.experimental.sections import Experimental
from genenv.signals import AlphaSignal

# an epoch's teacher metrics before anything is read (stable keys in these signals' metrics rows)
NO_CREDIT = {"teacher_reward_mean": None, "teacher_probe_tasks": 0, "teacher_backward_passes": 0,
             "teacher_forward_sequences": 0}


class CreditSignal(Experimental, AlphaSignal):
    """A signal whose reward for each valid generation is computed in its hook (:meth:`credit_rewards`) and kept
    (``credited``: the candidate's id -> its reward; the loop pays the same candidates in the same epoch); a
    candidate without one (the hook read nothing) earns the paper's rescaled R_env."""

    def __init__(self, cfg):
        super().__init__(cfg)
        self.credited: dict[int, float] = {}
        self._kept: list = []   # the candidates credited, so their ids stay theirs until they are paid

    @abc.abstractmethod
    def credit_rewards(self, domain, agent, state, valid: list, epoch: int, stats: dict) -> list[float]:
        """The reward of each of ``valid`` (the epoch's valid generations with rollouts); may add to ``stats``."""

    def before_agent_update(self, domain, agent, state, generated, epoch):
        valid = [c for c in generated if c.valid and c.episodes]
        self.credited, self._kept = {}, valid
        if not valid:
            return dict(NO_CREDIT)
        stats = dict(NO_CREDIT)
        rewards = self.credit_rewards(domain, agent, state, valid, epoch, stats)
        from genenv.metrics import mean  # noqa: PLC0415 (a run's module: registering this class imports no torch)
        stats["teacher_reward_mean"] = mean(rewards)
        self.credited = {id(c): float(reward) for c, reward in zip(valid, rewards)}
        return stats

    def paid(self, candidate):
        if id(candidate) in self.credited:
            return self.credited[id(candidate)]
        return super().paid(candidate)
