"""The base of the experimental signals that read the agent before its update (issue 55): their hook,
:meth:`genenv.signals.Signal.before_agent_update`, puts a reward on each valid, rolled-out generation
(``teacher_reward``), which the pg update then pays, and reports the ``teacher_*`` metrics."""

from __future__ import annotations

import abc

from genenv.experimental.sections import Experimental
from genenv.signals import AlphaSignal

# an epoch's teacher metrics before anything is read (stable keys in these signals' metrics rows)
NO_CREDIT = {"teacher_reward_mean": None, "teacher_probe_tasks": 0, "teacher_backward_passes": 0,
             "teacher_forward_sequences": 0}


class CreditSignal(Experimental, AlphaSignal):
    """A signal whose reward for each valid generation is computed in its hook (:meth:`credit_rewards`); a
    candidate without one (the hook read nothing) earns the paper's rescaled R_env."""

    @abc.abstractmethod
    def credit_rewards(self, domain, agent, state, valid: list, epoch: int, stats: dict) -> list[float]:
        """The reward of each of ``valid`` (the epoch's valid generations with rollouts); may add to ``stats``."""

    def before_agent_update(self, domain, agent, state, generated, epoch):
        valid = [i for i, c in enumerate(generated) if c.valid and c.episodes]
        if not valid:
            return generated, dict(NO_CREDIT)
        stats = dict(NO_CREDIT)
        rewards = self.credit_rewards(domain, agent, state, [generated[i] for i in valid], epoch, stats)
        from genenv.metrics import mean  # noqa: PLC0415 (a run's module: registering this class imports no torch)
        stats["teacher_reward_mean"] = mean(rewards)
        out = list(generated)
        for i, reward in zip(valid, rewards):
            out[i] = out[i].updated(teacher_reward=float(reward))
        return out, stats

    def paid(self, candidate):
        if candidate.teacher_reward is not None:
            return float(candidate.teacher_reward)
        return super().paid(candidate)
