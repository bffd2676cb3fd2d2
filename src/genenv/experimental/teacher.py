"""What a task teaches the agent: two level-free signals for the simulator's reward (issue 55, ``experimental.signal``).

The paper pays a task R_env(p_hat), which is the same for a task the agent always fails and one it always solves,
and which says nothing about what the agent learns from it (measured: trained simulators put more tasks in the
band and the agent ends no better, docs/results-log/issue55.md). Two signals that read the agent itself:

- ``probe_gain`` (a grounded teacher reward, as SOAR's, credited from the real update): each valid task is paid
  the first-order change its GRPO gradient makes to the agent's expected success on a held-in probe set, tasks
  drawn each epoch from the training pool (the seed tasks and earlier valid tasks, never dev or held-out):
  ``g_probe . g_task``, where ``g_probe`` is the gradient of the probe set's mean probability of its verified
  responses (at temperature 1 the chance a sample is exactly right) and ``g_task`` the task's policy gradient at
  the rollouts' own policy (advantage-weighted log-probs, token mean, as GRPO's first step takes it). A task
  whose rollouts all agree has no gradient and earns 0, like the paper's reward at p_hat = 0 or 1; among the
  others, one that helps the probe set earns more and one that would make the agent forget earns less than 0.
  The epoch's gains are divided by their largest magnitude, so they lie in [-1, 1].
- ``answer_likelihood`` (a continuous, directional difficulty): each valid task is paid by the agent's probability
  P of the task's verified response (teacher-forced, one forward pass, no rollouts), in log-odds around alpha:
  ``exp(-(logit P - logit alpha)^2 / (2 width^2))``. Unlike p_hat from 8 rollouts, P tells a task almost solved
  (P = 0.9) from a trivial one (P = 0.9999) and one nearly within reach (P = 0.05) from a hopeless one
  (P = 1e-6): the simulator gets a direction where every p_hat is 0 or 1.

Both use only what the paper's method has (the verifier's reference responses, the agent and its rollouts), no
domain levels. Their extra model calls (backward passes, teacher-forced sequences) are counted in each epoch's
metrics beside the agent's rollouts, which they do not change. This module is their arithmetic (torch); the
signals, which import it when they first pay a task, are :mod:`genenv.experimental.agent_signals`.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from genenv.algos.grpo import informative_samples
from genenv.algos.rwr import WeightedExample


def logit(p: float) -> float:
    """log(p / (1 - p)); -inf at 0 and +inf at 1."""
    if p <= 0.0:
        return -math.inf
    if p >= 1.0:
        return math.inf
    return math.log(p) - math.log1p(-p)


def likelihood_reward(logp: float, alpha: float = 0.5, width: float = 2.0) -> float:
    """exp(-(logit P - logit alpha)^2 / (2 width^2)) for P = exp(``logp``): 1 at P = alpha, falling with the
    distance in log-odds (at width 2: 0.55 at P = 0.1 or 0.9, 0.07 at P = 0.01 or 0.99). 0 at P = 0 or 1."""
    if not math.isfinite(logp) or logp > 0.0:
        return 0.0
    p = math.exp(logp)
    log_odds = logp - math.log(-math.expm1(logp)) if p < 1.0 else math.inf   # logit from logp, stable near 0
    if not math.isfinite(log_odds):
        return 0.0
    return math.exp(-((log_odds - logit(alpha)) ** 2) / (2.0 * width ** 2))


def scaled_by_largest(values) -> list[float]:
    """``values`` divided by their largest magnitude (into [-1, 1]); all zeros stay zeros."""
    values = np.asarray(values, dtype=float)
    largest = float(np.max(np.abs(values))) if values.size else 0.0
    if largest == 0.0 or not math.isfinite(largest):
        return [0.0] * len(values)
    return (values / largest).tolist()


def draw_probe(pool, rng: np.random.Generator, n: int, side: str = "all", alpha: float = 0.5) -> list:
    """``n`` held-in probe tasks from the training ``pool`` (with replacement when it holds fewer). ``side="all"``:
    the pool's uniform draw; ``"hard"``: only tasks rolled out with a last p_hat below ``alpha`` (the agent fails
    them more often than not; by the probe objective's P weighting, those it nearly solves count most), the
    uniform draw while no task is."""
    if side == "hard":
        hard = [entry.task for entry in pool.entries if entry.p_hat_history and entry.p_hat_history[-1] < alpha]
        if hard:
            return [hard[i] for i in rng.choice(len(hard), size=n, replace=n > len(hard))]
    return pool.sample(rng, n)


def verified_examples(domain, tasks, build) -> tuple[list[WeightedExample], list[int]]:
    """The verified responses of ``tasks`` as (context, target) examples, ``build(tasks)`` making them (the warm
    start's :func:`genenv.warmstart.agent_examples`: each task's ``domain.warmstart_examples``, contexts as
    rollouts build them), and how many examples each task has (a multi-turn task: one per expert step)."""
    counts = [len(domain.warmstart_examples(task)) for task in tasks]
    return build(tasks), counts


def sequence_logprobs(agent, examples: list[WeightedExample], temperature: float = 1.0,
                      batch: int = 256) -> torch.Tensor:
    """log P(target | context) of each example, summed over its target tokens (EOS included), with gradients."""
    out = []
    for first in range(0, len(examples), batch):
        chunk = examples[first:first + batch]
        seq = agent.build_batch([e.prompt_ids for e in chunk], [e.target_ids for e in chunk])
        logp, _ = agent.token_logprobs(seq, temperature=temperature)
        out.append((logp.float() * seq.response_mask).sum(-1))
    return torch.cat(out) if out else torch.zeros(0)


def task_logprobs(agent, examples: list[WeightedExample], counts: list[int], temperature: float = 1.0) -> list[float]:
    """Each task's log-probability of its verified response (the sum over its examples), no gradients."""
    agent.set_training(False)
    with torch.no_grad():
        per_example = sequence_logprobs(agent, examples, temperature).double().cpu().numpy()
    bounds = np.cumsum([0] + counts)
    return [float(per_example[a:b].sum()) for a, b in zip(bounds[:-1], bounds[1:])]


def probe_direction(agent, examples: list[WeightedExample], counts: list[int],
                    temperature: float = 1.0) -> list[torch.Tensor]:
    """The gradient of the probe tasks' mean probability of their verified responses (each task's P the product
    over its examples) with respect to the agent's trainable parameters."""
    agent.set_training(False)   # (no dropout: the same numbers as the update's forward pass, no random draws)
    params = agent.trainable_parameters()
    logp = sequence_logprobs(agent, examples, temperature)
    index = torch.repeat_interleave(torch.arange(len(counts)), torch.tensor(counts))
    per_task = torch.zeros(len(counts), dtype=logp.dtype).index_add(0, index, logp)
    objective = torch.exp(per_task).mean()
    return [g if g is not None else torch.zeros_like(p)
            for g, p in zip(torch.autograd.grad(objective, params, allow_unused=True), params)]


def probe_gains(agent, groups, direction: list[torch.Tensor],
                temperature: float = 1.0) -> tuple[list[float], int, int]:
    """Per rollout group: ``direction . g`` with g the group's policy-gradient ascent direction at the policy that
    sampled it (sum of advantage x log-prob over its response tokens, divided by its tokens: GRPO's token mean at
    ratio 1); 0 for a group whose rewards all agree (no gradient). Returns the gains, the backward passes made and
    the sequences they read."""
    agent.set_training(False)
    params = agent.trainable_parameters()
    gains, passes, sequences = [], 0, 0
    for group in groups:
        samples = informative_samples([group])
        if not samples:
            gains.append(0.0)
            continue
        samples = samples[0]
        seq = agent.build_batch([s.prompt_ids for s in samples], [s.response_ids for s in samples])
        logp, _ = agent.token_logprobs(seq, temperature=temperature)
        advantages = torch.tensor([s.advantage for s in samples], dtype=logp.dtype, device=logp.device)
        objective = (logp * seq.response_mask * advantages[:, None]).sum() / seq.response_mask.sum().clamp(min=1.0)
        grads = torch.autograd.grad(objective, params, allow_unused=True)
        passes += 1
        sequences += len(samples)
        gains.append(float(sum((g.double() * d.double()).sum() for g, d in zip(grads, direction) if g is not None)))
    return gains, passes, sequences
