"""A policy-gradient update of the simulator (beyond the paper), like R-Zero's and Agent0's challengers. It receives
each generation's reward from the loop (computed in :mod:`genenv.reward`; this module never scores).

Each seed's ``variations`` generations form a group. A valid generation's reward is its R_env rescaled to [0, 1]
(:func:`genenv.reward.frontier_reward`: 0 for a task the agent always solves or always fails, 1 at alpha); an
invalid one earns ``invalid_reward`` (default 0, what a useless valid task earns). Advantages are the rewards
minus the group's mean, not divided by its standard deviation: with the raw R_env (0.61 for a useless valid task
at beta = 2) and normalised advantages, "valid against invalid" was worth a full +-1 at any beta and the
simulator learned validity alone, drifting to tasks nobody solves (measured, docs/results-log.md). The simulator
takes clipped-surrogate steps (:func:`genenv.algos.grpo.grpo_step`) with a k3 KL penalty to
its initial policy, under the same max-KL cap per update as RWR (:class:`genenv.algos.kl_cap.KLCap`).
Groups whose generations all earned the same reward carry no signal and are left out.
"""

from __future__ import annotations

import numpy as np

from genenv.algos.grpo import PolicySample, grpo_step, is_informative, prepare_samples, with_trainer_logprobs
from genenv.algos.kl_cap import KLCap, capped_steps
from genenv.algos.optim import shuffled_passes


def reward_groups(candidates, rewards) -> list[list[PolicySample]]:
    """The informative seed groups of an epoch's simulator generations as GRPO samples, each with its reward (one per
    candidate, computed by the loop: :func:`genenv.reward.challenger_rewards`) minus its group's mean as the
    advantage. A generation without its sampled tokens and log-probs (a remote simulator's) is left out."""
    by_batch: dict[int, list] = {}
    for c, reward in zip(candidates, rewards, strict=True):
        if c.token_ids and len(c.logprobs) == len(c.token_ids):
            by_batch.setdefault(c.batch, []).append((c, float(reward)))
    groups = []
    for members in by_batch.values():
        values = np.asarray([reward for _, reward in members])
        if is_informative(values):
            groups.append([PolicySample(c.prompt_ids, list(c.token_ids), list(c.logprobs), float(a))
                           for (c, _), a in zip(members, values - values.mean())])
    return groups


def pg_update(policy, reference, optimizer, groups: list[list[PolicySample]], *, steps: int, minibatch_groups: int,
              clip_eps: float, kl_coef: float, max_kl: float, grad_clip: float, temperature: float,
              rng: np.random.Generator, recompute_old_logprobs: bool = False, constraint=None) -> dict:
    """``steps`` clipped-surrogate steps on minibatches of ``minibatch_groups`` groups (passes over the groups,
    each a fresh shuffle), capped in KL like RWR. Returns the mean loss and KL-to-reference of the kept steps,
    the update's KL, the simulator's KL to ``reference`` after it, kept steps, and the KL of an undone step.
    ``constraint``: the task shape the generations were sampled under (``env.constrained``): every log-prob is
    the constrained distribution's."""
    stats = {"loss": float("nan"), "kl": float("nan"), "update_kl": 0.0, "kl_to_initial": None, "steps": 0,
             "kl_capped": 0, "rejected_kl": None, "skipped": 0}
    if not groups or steps <= 0:
        return stats
    if recompute_old_logprobs:   # samples another engine drew (sampler=llama.cpp): the trainer's own log-probs
        groups = with_trainer_logprobs(policy, groups, temperature=temperature, constraint=constraint)
    samples = [s for group in groups for s in group]
    chunks = [samples[i:i + 64] for i in range(0, len(samples), 64)]
    watched = [policy.build_batch([s.prompt_ids for s in c], [s.response_ids for s in c]) for c in chunks]
    cap = KLCap(policy, optimizer, watched, max_kl, watch_start=reference is not None, constraint=constraint)
    # Every sample in one watched batch: a step on every group (minibatch_groups >= the groups, the usual case)
    # takes a reordering of its rows instead of building the batch again
    whole = prepare_samples(policy, samples, batch=watched[0]) if len(watched) == 1 else None
    first = np.cumsum([0] + [len(group) for group in groups])   # each group's first row in `samples`
    minibatches = shuffled_passes(len(groups), minibatch_groups, rng)

    def step():
        picks = next(minibatches)
        prepared = None
        if whole is not None and len(picks) == len(groups):
            prepared = whole.reordered([int(first[i]) + k for i in picks for k in range(len(groups[i]))])
        result = grpo_step(policy, reference, optimizer, [s for i in picks for s in groups[i]], clip_eps=clip_eps,
                           kl_coef=kl_coef, grad_clip=grad_clip, temperature=temperature, prepared=prepared,
                           constraint=constraint)
        return None if result["skipped"] else result
    kept, update = capped_steps(cap, steps, step, reference)
    stats.update(update)
    if kept:
        stats.update(loss=float(np.mean([s["loss"] for s in kept])), kl=float(np.mean([s["kl"] for s in kept])))
    return stats
