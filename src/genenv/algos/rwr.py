"""Reward-weighted regression for the environment simulator (and plain SFT as its uniform-weight case).

loss = sum_i w_i NLL(task_i | context_i) / sum_i w_i + eta * KL(pi_env || pi_env^0)

NLL and KL are per sequence (summed over the task tokens only, never the context). The KL to the initial
simulator uses the k3 estimator on the generated tokens. The size of one epoch's update is capped: after
each step the KL between the simulator and the simulator at the start of the update is estimated on the
whole weighted set, and a step that passes ``max_kl`` is undone and ends the update.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from genenv.algos.kl_cap import KLCap, capped_steps, sequence_kl
from genenv.algos.optim import guarded_step, shuffled_passes


@dataclass
class WeightedExample:
    """A (context -> target) pair with its regression weight."""
    prompt_ids: list[int]
    target_ids: list[int]
    weight: float = 1.0


def sequence_nll(logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Negative log-likelihood of each sequence's target tokens: [B]."""
    return -(logp * mask).sum(-1)


def weighted_nll(logp: torch.Tensor, mask: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """sum_i w_i NLL_i / sum_i w_i."""
    return (weights * sequence_nll(logp, mask)).sum() / weights.sum().clamp(min=1e-12)


def rwr_loss(logp, ref_logp, mask, weights, kl_coef: float = 0.05):
    nll = weighted_nll(logp, mask, weights)
    loss = nll
    kl = torch.zeros(())
    if ref_logp is not None:
        kl = sequence_kl(logp, ref_logp, mask).mean()
        loss = loss + kl_coef * kl
    return loss, {"nll": nll.item(), "kl": kl.item()}


def _batch(policy, examples: list[WeightedExample]):
    batch = policy.build_batch([e.prompt_ids for e in examples], [e.target_ids for e in examples])
    weights = torch.tensor([e.weight for e in examples], dtype=torch.float32, device=policy.device)
    return batch, weights


def rwr_update(policy, reference, optimizer, examples: list[WeightedExample], *, steps: int, batch_size: int,
               kl_coef: float = 0.05, max_kl: float = 0.5, grad_clip: float = 1.0,
               rng: np.random.Generator, constraint=None) -> dict:
    """``steps`` optimiser steps of weighted regression on ``examples``, capped in KL (every log-prob under
    ``constraint``, the simulator's task shape, when given: ``env.constrained``).

    Minibatches of ``batch_size`` are drawn in passes over the set, each pass a fresh shuffle, so a set that
    fits one minibatch still gets ``steps`` steps. After every step the KL between the simulator and the
    simulator at the start of this update is measured on the whole set (``update_kl``); a step that takes it
    past ``max_kl`` is undone (weights and optimiser state restored) and the update stops (``kl_capped``), so
    the kept update never exceeds the cap. Returns the mean loss / NLL / KL-to-reference of the kept steps,
    ``kl_to_initial`` (the simulator's KL to ``reference`` on the set after the update), the number of kept
    steps and the KL of an undone step (``rejected_kl``).
    """
    stats = {"loss": float("nan"), "nll": float("nan"), "kl": float("nan"), "update_kl": 0.0,
             "kl_to_initial": None, "steps": 0, "kl_capped": 0, "rejected_kl": None, "skipped": 0}
    if not examples or steps <= 0:
        return stats
    whole_set = [_batch(policy, examples[i:i + batch_size]) for i in range(0, len(examples), batch_size)]
    cap = KLCap(policy, optimizer, [batch for batch, _ in whole_set], max_kl,
                 watch_start=reference is not None, constraint=constraint)
    minibatches = shuffled_passes(len(examples), batch_size, rng)

    def step():
        batch, weights = _batch(policy, [examples[j] for j in next(minibatches)])
        policy.set_training(True)
        logp, _ = policy.token_logprobs(batch, constraint=constraint)
        ref_logp = None
        if reference is not None and kl_coef > 0:
            with torch.no_grad():
                ref_logp, _ = reference.token_logprobs(batch, constraint=constraint)
        loss, parts = rwr_loss(logp, ref_logp, batch.response_mask, weights, kl_coef)
        if guarded_step(policy, optimizer, loss, grad_clip, "RWR") is None:
            return None
        return {"loss": loss.item(), **parts}
    kept, update = capped_steps(cap, steps, step, reference)
    stats.update(update)
    if kept:
        stats.update({name: float(np.mean([s[name] for s in kept])) for name in ("loss", "nll", "kl")})
    return stats


def supervised_finetune(policy, examples: list[WeightedExample], *, steps: int, batch_size: int, lr: float,
                        rng: np.random.Generator, grad_clip: float = 1.0, progress=None, optimizer=None,
                        curve: list[float] | None = None, after_step=None) -> list[float]:
    """Plain SFT (uniform weights, no KL): the warm start of both players. Returns the loss curve.

    Resuming: pass the ``optimizer`` and the ``curve`` of the steps already taken (and ``rng`` in the state it
    had then); the loop continues at step ``len(curve)``. ``after_step(optimizer, curve)`` runs after every step
    (the warm start's journal)."""
    optimizer = optimizer if optimizer is not None else torch.optim.AdamW(policy.model.parameters(), lr=lr)
    curve = list(curve or [])
    for _ in range(len(curve), steps):
        picks = rng.choice(len(examples), size=min(batch_size, len(examples)), replace=False)
        batch, _ = _batch(policy, [examples[i] for i in picks])
        policy.set_training(True)
        logp, _ = policy.token_logprobs(batch)
        # token-mean NLL: sequences of different length weigh by their tokens
        loss = -(logp * batch.response_mask).sum() / batch.response_mask.sum()
        guarded_step(policy, optimizer, loss, grad_clip, "SFT")
        curve.append(loss.item())
        if progress is not None:
            progress.update(1)
        if after_step is not None:
            after_step(optimizer, curve)
    return curve
