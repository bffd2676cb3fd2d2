"""Reward-weighted regression for the environment simulator (and plain SFT as its uniform-weight case).

loss = sum_i w_i NLL(task_i | context_i) / sum_i w_i + eta * KL(pi_env || pi_env^0)

NLL and KL are per sequence (summed over the task tokens only, never the context). The KL to the initial
simulator uses the k3 estimator on the generated tokens. The size of one epoch's update is capped: before
each step the KL between the current simulator and the simulator at the start of the update is estimated
on the batch, and the update stops once it passes ``max_kl``.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import torch

from genenv.algos.grpo import k3_kl


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


def sequence_kl(logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """k3 estimate of KL(pi || ref) per sequence, summed over target tokens: [B]."""
    return (k3_kl(logp, ref_logp) * mask).sum(-1)


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
               rng: np.random.Generator) -> dict:
    """Weighted-regression steps over one shuffled pass of ``examples`` (at most ``steps`` minibatches).

    Returns the mean loss / NLL / KL-to-initial over the steps taken, the update's KL to the start of the
    update (``update_kl``), how many steps ran and whether the KL cap stopped the update.
    """
    stats = {"loss": float("nan"), "nll": float("nan"), "kl": float("nan"), "update_kl": 0.0, "steps": 0,
             "kl_capped": 0, "skipped": 0}
    if not examples or steps <= 0:
        return stats
    losses, nlls, kls = [], [], []
    # One pass over the weighted set at most: re-fitting the same few strings many times collapsed the
    # simulator into degenerate text (measured on the default domain).
    order = rng.permutation(len(examples))
    batches = []
    for i in range(0, len(order), batch_size):
        batches.append(_batch(policy, [examples[j] for j in order[i:i + batch_size]]))
    batches = batches[:steps]
    # log-probs of the simulator as it was before this update, for the max-KL cap (no model copy needed)
    start_logps = []
    if max_kl > 0:
        policy.model.eval()
        with torch.no_grad():
            start_logps = [policy.token_logprobs(b)[0] for b, _ in batches]
    for step, (batch, weights) in enumerate(batches):
        policy.model.train()
        logp, _ = policy.token_logprobs(batch)
        if start_logps and step > 0:
            with torch.no_grad():
                update_kl = sequence_kl(logp.detach(), start_logps[step], batch.response_mask).mean().item()
            stats["update_kl"] = update_kl
            if update_kl > max_kl:
                stats["kl_capped"] = 1
                break
        ref_logp = None
        if reference is not None and kl_coef > 0:
            with torch.no_grad():
                ref_logp, _ = reference.token_logprobs(batch)
        loss, parts = rwr_loss(logp, ref_logp, batch.response_mask, weights, kl_coef)
        optimizer.zero_grad(set_to_none=True)
        if not math.isfinite(loss.item()):
            warnings.warn("RWR: non-finite loss, step skipped", RuntimeWarning, stacklevel=2)
            stats["skipped"] += 1
            continue
        with policy.timed():
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(policy.trainable_parameters(),
                                                  grad_clip if grad_clip > 0 else float("inf"))
            if not torch.isfinite(norm):
                optimizer.zero_grad(set_to_none=True)
                warnings.warn("RWR: non-finite gradient, step skipped", RuntimeWarning, stacklevel=2)
                stats["skipped"] += 1
                continue
            optimizer.step()
        losses.append(loss.item())
        nlls.append(parts["nll"])
        kls.append(parts["kl"])
        stats["steps"] += 1
    if start_logps and stats["steps"] and not stats["kl_capped"]:
        # the size of the whole update, measured on the last batch after its step
        with torch.no_grad():
            now, _ = policy.token_logprobs(batch)
            stats["update_kl"] = sequence_kl(now, start_logps[step], batch.response_mask).mean().item()
    if losses:
        stats.update(loss=float(np.mean(losses)), nll=float(np.mean(nlls)), kl=float(np.mean(kls)))
    return stats


def supervised_finetune(policy, examples: list[WeightedExample], *, steps: int, batch_size: int, lr: float,
                        rng: np.random.Generator, grad_clip: float = 1.0, progress=None) -> list[float]:
    """Plain SFT (uniform weights, no KL): the warm start of both players. Returns the loss curve."""
    optimizer = torch.optim.AdamW(policy.model.parameters(), lr=lr)
    curve = []
    for _ in range(steps):
        picks = rng.choice(len(examples), size=min(batch_size, len(examples)), replace=False)
        batch, _ = _batch(policy, [examples[i] for i in picks])
        policy.model.train()
        logp, _ = policy.token_logprobs(batch)
        # token-mean NLL: sequences of different length weigh by their tokens
        loss = -(logp * batch.response_mask).sum() / batch.response_mask.sum()
        optimizer.zero_grad(set_to_none=True)
        with policy.timed():
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.trainable_parameters(), grad_clip)
            optimizer.step()
        curve.append(loss.item())
        if progress is not None:
            progress.update(1)
    optimizer.zero_grad(set_to_none=True)  # no stale gradients left on the weights for whoever trains next
    return curve
