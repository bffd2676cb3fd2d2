"""The experimental signals that read the agent (issue 55): ``experimental.signal=probe_gain`` and
``answer_likelihood``, their knobs and what they pay. Their arithmetic is :mod:`genenv.experimental.teacher`
(torch), imported when a signal first pays a task, so registering them (every config load) costs no torch import.
"""

from __future__ import annotations

from dataclasses import dataclass

from genenv.config import knob
from genenv.experimental.credit import CreditSignal
from genenv.experimental.sections import replaces
from genenv.seeding import phase_rng


@dataclass
class ProbeGainKnobs:
    """``experimental.signal=probe_gain``."""
    tasks: int = knob(256, "held-in tasks drawn from the training pool each epoch for the probe set (never dev or "
                      "held-out)", lo=1)
    side: str = knob("all", "which pool tasks the probe set is drawn from: 'all' (every pool task, mastered ones "
                     "included, so forgetting costs) or 'hard' (only tasks whose last p_hat is below alpha; the "
                     "whole pool while none is)", choices=("all", "hard"))


@dataclass
class AnswerLikelihoodKnobs:
    """``experimental.signal=answer_likelihood``."""
    width: float = knob(2.0, "the reward's width in log-odds (2: P = 0.1 or 0.9 earns 0.55, P = 0.01 or 0.99 "
                        "earns 0.07)", lo=0.01)


def _builder(cfg, domain, agent):
    from genenv.warmstart import agent_examples  # noqa: PLC0415 (the warm start's prompts and responses)
    return lambda tasks: agent_examples(cfg, domain, agent, tasks)


@replaces("signal", "probe_gain")
class ProbeGain(CreditSignal):
    """Each valid task earns its GRPO gradient's first-order gain in the agent's expected success on a probe set of
    held-in pool tasks, scaled by the epoch's largest into [-1, 1]."""
    knobs, section, reads_agent = ProbeGainKnobs, "probe_gain", True

    def credit_rewards(self, domain, agent, state, valid, epoch, stats):
        from genenv.experimental.teacher import (  # noqa: PLC0415 (torch)
            draw_probe,
            probe_direction,
            probe_gains,
            scaled_by_largest,
            verified_examples,
        )
        cfg, temperature = self.cfg, self.cfg.agent.temperature
        probe = draw_probe(state.task_pool, phase_rng(cfg.seed, epoch, "probe"), self.options.tasks,
                           self.options.side, cfg.curriculum_reward.alpha)
        examples, counts = verified_examples(domain, probe, _builder(cfg, domain, agent))
        direction = probe_direction(agent, examples, counts, temperature)
        gains, passes, sequences = probe_gains(agent, [c.episodes for c in valid], direction, temperature)
        stats.update(teacher_probe_tasks=len(probe), teacher_backward_passes=passes + 1,
                     teacher_forward_sequences=len(examples) + sequences)
        return scaled_by_largest(gains)


@replaces("signal", "answer_likelihood")
class AnswerLikelihood(CreditSignal):
    """Each valid task earns the agent's probability P of its verified response, in log-odds around alpha."""
    knobs, section, reads_agent = AnswerLikelihoodKnobs, "answer_likelihood", True

    def credit_rewards(self, domain, agent, state, valid, epoch, stats):
        from genenv.experimental.teacher import likelihood_reward, task_logprobs, verified_examples  # noqa: PLC0415
        cfg = self.cfg
        examples, counts = verified_examples(domain, [c.parsed for c in valid], _builder(cfg, domain, agent))
        stats["teacher_forward_sequences"] = len(examples)
        return [likelihood_reward(lp, cfg.curriculum_reward.alpha, self.options.width)
                for lp in task_logprobs(agent, examples, counts, cfg.agent.temperature)]
