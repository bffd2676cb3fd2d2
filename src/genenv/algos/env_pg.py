"""A policy-gradient update of the simulator (beyond the paper), like R-Zero's and Agent0's challengers.

Each seed's ``variations`` generations form a group; a generation's reward is its R_env, 0 when the domain
rejected it (so the simulator also learns to write valid tasks); advantages are normalised within the group,
and the simulator takes clipped-surrogate steps (:func:`genenv.algos.grpo.grpo_step`) with a k3 KL penalty to
its initial policy, under the same max-KL cap per update as RWR (:class:`genenv.algos.kl_cap.KLCap`).
Groups whose generations all earned the same reward carry no signal and are left out.
"""

from __future__ import annotations

import numpy as np

from genenv.algos.grpo import PolicySample, group_advantages, grpo_step, is_informative
from genenv.algos.kl_cap import KLCap
from genenv.algos.optim import shuffled_passes


def challenger_groups(candidates) -> list[list[PolicySample]]:
    """The informative seed groups of an epoch's simulator generations as GRPO samples (reward: R_env of a
    valid task, 0 for an invalid one)."""
    by_batch: dict[int, list] = {}
    for c in candidates:
        if c.token_ids and len(c.logprobs) == len(c.token_ids):
            by_batch.setdefault(c.batch, []).append(c)
    groups = []
    for members in by_batch.values():
        rewards = [c.r_env if c.valid else 0.0 for c in members]
        if is_informative(rewards):
            groups.append([PolicySample(c.prompt_ids, list(c.token_ids), list(c.logprobs), float(a))
                           for c, a in zip(members, group_advantages(rewards))])
    return groups


def pg_update(policy, reference, optimizer, groups: list[list[PolicySample]], *, steps: int, minibatch_groups: int,
              clip_eps: float, kl_coef: float, max_kl: float, grad_clip: float, temperature: float,
              rng: np.random.Generator) -> dict:
    """``steps`` clipped-surrogate steps on minibatches of ``minibatch_groups`` groups (passes over the groups,
    each a fresh shuffle), capped in KL like RWR. Returns the mean loss and KL-to-reference of the kept steps,
    the update's KL, the simulator's KL to ``reference`` after it, kept steps, and the KL of an undone step."""
    stats = {"loss": float("nan"), "kl": float("nan"), "update_kl": 0.0, "kl_to_initial": None, "steps": 0,
             "kl_capped": 0, "rejected_kl": None, "skipped": 0}
    if not groups or steps <= 0:
        return stats
    samples = [s for group in groups for s in group]
    chunks = [samples[i:i + 64] for i in range(0, len(samples), 64)]
    watched = [policy.build_batch([s.prompt_ids for s in c], [s.response_ids for s in c]) for c in chunks]
    cap = KLCap(policy, optimizer, watched, max_kl)
    losses, kls = [], []
    minibatches = shuffled_passes(len(groups), minibatch_groups, rng)
    for _ in range(steps):
        picks = next(minibatches)
        cap.before_step()
        step = grpo_step(policy, reference, optimizer, [s for i in picks for s in groups[i]], clip_eps=clip_eps,
                         kl_coef=kl_coef, grad_clip=grad_clip, temperature=temperature)
        if step["skipped"]:
            stats["skipped"] += 1
            continue
        if not cap.keep_step():
            break
        losses.append(step["loss"])
        kls.append(step["kl"])
        stats["steps"] += 1
    stats.update(update_kl=cap.update_kl, kl_capped=cap.capped, rejected_kl=cap.rejected_kl)
    if losses:
        stats.update(loss=float(np.mean(losses)), kl=float(np.mean(kls)))
    if reference is not None:
        stats["kl_to_initial"] = cap.kl_to(reference)
    return stats
