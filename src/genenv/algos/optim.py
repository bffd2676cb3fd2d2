"""The one guarded optimiser step every update uses (GRPO, RWR, SFT)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch


def shuffled_passes(n: int, batch_size: int, rng: np.random.Generator):
    """Index minibatches of ``n`` items forever: pass after pass, each a fresh shuffle cut into batches."""
    while True:
        order = rng.permutation(n)
        for start in range(0, n, batch_size):
            yield order[start:start + batch_size].tolist()


def guarded_step(policy, optimizer, loss, grad_clip: float, what: str) -> float | None:
    """Backward, clip the gradient norm to ``grad_clip`` (0: no clip) and step; returns the gradient norm.

    ``loss`` is one tensor, or an iterator of micro-batch losses whose sum is the loss: each is produced (its
    forward pass run) only once the previous one has gone through backward, so one micro-batch's activations
    are in memory at a time while the gradients accumulate. A non-finite loss or gradient skips the step with a
    warning naming ``what`` and returns None, so one bad batch never writes NaNs into the weights. Time spent
    here counts as model time of ``policy``."""
    optimizer.zero_grad(set_to_none=True)
    for part in ([loss] if isinstance(loss, torch.Tensor) else loss):
        if not math.isfinite(part.item()):
            optimizer.zero_grad(set_to_none=True)
            warnings.warn(f"{what}: non-finite loss, step skipped", RuntimeWarning, stacklevel=3)
            return None
        with policy.timed():
            part.backward()
    with policy.timed():
        # the optimiser's parameters: the ones this step changes (those of the policy with gradients, in its
        # order), listed without walking the model's modules
        norm = torch.nn.utils.clip_grad_norm_(optimizer_params(optimizer), grad_clip if grad_clip > 0 else
                                              float("inf"))
        if not torch.isfinite(norm):
            optimizer.zero_grad(set_to_none=True)
            warnings.warn(f"{what}: non-finite gradient, step skipped", RuntimeWarning, stacklevel=3)
            return None
        optimizer.step()
        # the gradients go now, not at the next step: one player's gradients never sit in memory while the
        # other player generates or trains
        optimizer.zero_grad(set_to_none=True)
    return float(norm)


def optimizer_params(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    """The parameters ``optimizer`` steps, group by group in its order."""
    return [p for group in optimizer.param_groups for p in group["params"]]


def optimizer_steps(optimizer: torch.optim.Optimizer) -> int:
    """How many steps the optimiser has taken (AdamW's own per-parameter count, saved with its state)."""
    for state in optimizer.state.values():
        if "step" in state:
            return int(state["step"])
    return 0


def warmup_lr(optimizer: torch.optim.Optimizer, lr: float, warmup_steps: int) -> float:
    """Linear warmup: the k-th step (1-based) runs at ``lr * min(1, k / warmup_steps)``; 0 steps: always ``lr``.
    Counted from the optimiser's own state, so a run resumed from a checkpoint continues the schedule exactly.
    Sets the learning rate of every parameter group and returns it."""
    rate = lr if warmup_steps <= 0 else lr * min(1.0, (optimizer_steps(optimizer) + 1) / warmup_steps)
    for group in optimizer.param_groups:
        group["lr"] = rate
    return rate
