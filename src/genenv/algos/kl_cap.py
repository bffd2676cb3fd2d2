"""The max-KL cap of one simulator update, shared by RWR and the policy-gradient update.

Before the update, the policy's log-probs on a fixed set of sequences are kept (no model copy). After each
optimiser step the KL(start || now) of the policy at the start of the update to the policy now is estimated on
them (:func:`update_kl`: k3 with the start as the sampling side, summed over tokens, mean over sequences); a step
that takes it past ``max_kl`` is undone (weights and optimiser state restored) and the update stops, so a kept
update never exceeds the cap. The sequences are what the simulator sampled before the update (RWR with
``env.rwr.pool_replay`` adds earlier epochs' samples), so the estimate is unbiased for KL(start || now) on the
simulator's own samples. (Before issue 42 it computed k3(now, start), an estimate of KL(now || start) only for
tokens sampled from the updated policy, which these are not.) What a step may have to give back is a plain copy
of the weights and the optimiser's state taken before it (:class:`StepUndo`).
"""

from __future__ import annotations

import copy

import torch

from genenv.algos.grpo import k3_kl
from genenv.algos.optim import optimizer_params


def sequence_kl(logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """k3 estimate of KL(pi || ref) per sequence, summed over target tokens: [B]. ``logp`` is pi's, the policy that
    sampled the tokens (the estimate is unbiased only then)."""
    return (k3_kl(logp, ref_logp) * mask).sum(-1)


def update_kl(policy, batches, start_logps, constraint=None) -> float:
    """KL(start || now): the mean per-sequence k3 estimate with the start's log-probs ``start_logps`` as the
    sampling side and ``policy``'s log-probs now as the other, on ``batches`` (sampled by the start)."""
    kls = [sequence_kl(start, now, batch.response_mask)
           for batch, now, start in zip(batches, logprobs_on(policy, batches, constraint), start_logps)]
    return torch.cat(kls).mean().item()


def weighted_sequence_kl(sampler_logp: torch.Tensor, logp: torch.Tensor, ref_logp: torch.Tensor,
                         mask: torch.Tensor) -> torch.Tensor:
    """KL(pi || ref) per sequence on sequences another policy (the sampler) drew: pi's k3 estimate summed over
    tokens, weighted by the sequence's importance ratio pi / sampler, [B]; its mean is unbiased for KL(pi || ref).
    (k3 with ``ref`` or the sampler as pi's stand-in is not: where ``ref`` gives a sampled sequence far less mass
    than pi, exp(ref - pi) is tiny and harmless, but exp(pi - ref), the other way round, explodes.)"""
    weights = torch.exp(((logp - sampler_logp) * mask).sum(-1))
    return weights * sequence_kl(logp, ref_logp, mask)


def logprobs_on(policy, batches, constraint=None) -> list[torch.Tensor]:
    """The policy's per-token log-probs on ``batches``, in eval mode and without gradients (under ``constraint``,
    the distribution the sequences were drawn from, when given)."""
    policy.set_training(False)
    with torch.no_grad():
        return [policy.token_logprobs(batch, constraint=constraint)[0] for batch in batches]


class KLCap:
    """Watch one update of ``policy`` on ``batches`` (SequenceBatch): ``before_step()`` then, after the optimiser
    step, ``keep_step()`` (False: the step's KL(start || now), :func:`update_kl`, passed ``max_kl`` and it was
    undone; stop). ``max_kl`` 0: no cap. ``watch_start``: keep the start's log-probs without a cap too (for
    :meth:`kl_to`). ``constraint``: every log-prob under the distribution the sequences were drawn from."""

    def __init__(self, policy, optimizer, batches, max_kl: float, watch_start: bool = False, constraint=None):
        self.policy, self.optimizer, self.batches, self.max_kl = policy, optimizer, batches, max_kl
        self.constraint = constraint
        self.start_logps = logprobs_on(policy, batches, constraint) if max_kl > 0 or watch_start else []
        self.update_kl, self.capped, self.rejected_kl = 0.0, 0, None
        self._undo = StepUndo(optimizer)

    def before_step(self) -> None:
        if self.max_kl > 0:
            self._undo.take()

    def keep_step(self) -> bool:
        if self.max_kl <= 0:
            return True
        kl = update_kl(self.policy, self.batches, self.start_logps, self.constraint)
        if kl <= self.max_kl:
            self.update_kl = kl
            return True
        self._undo.restore()  # (a NaN KL is past the cap too)
        self.capped, self.rejected_kl = 1, kl
        return False

    def kl_to(self, reference) -> float:
        """KL(the policy now || ``reference``) on the watched set, which the policy at the start of the update
        sampled: :func:`weighted_sequence_kl` (importance-weighted k3, unbiased); needs the start's log-probs (a
        cap, or ``watch_start``). After the update, with the initial simulator: ``env_kl_to_initial``. (Until
        2026-11-28 this was k3 with ``reference`` as the sampling side, which it is not after the first update: a
        few sequences the initial simulator finds unlikely took single epochs' estimates to 100-13,000 nats.)"""
        now = logprobs_on(self.policy, self.batches, self.constraint)
        ref = logprobs_on(reference, self.batches, self.constraint)
        kls = [weighted_sequence_kl(start, n, r, batch.response_mask)
               for batch, start, n, r in zip(self.batches, self.start_logps, now, ref)]
        return torch.cat(kls).mean().item()


def capped_steps(cap: KLCap, steps: int, step, reference=None) -> tuple[list[dict], dict]:
    """Up to ``steps`` optimiser steps under ``cap``, the loop both simulator updates share: each ``step()`` (one
    optimiser step; its statistics, or None when the step's guard skipped it) between the cap's ``before_step`` and
    ``keep_step``; the update stops at the first step the cap undoes. Returns the kept steps' statistics and the
    update's: ``steps``, ``skipped``, ``update_kl``, ``kl_capped``, ``rejected_kl`` and, given ``reference``,
    ``kl_to_initial`` (:meth:`KLCap.kl_to`)."""
    kept, skipped = [], 0
    for _ in range(steps):
        cap.before_step()
        result = step()
        if result is None:
            skipped += 1
            continue
        if not cap.keep_step():
            break
        kept.append(result)
    stats = {"steps": len(kept), "skipped": skipped, "update_kl": cap.update_kl, "kl_capped": cap.capped,
             "rejected_kl": cap.rejected_kl}
    if reference is not None:
        stats["kl_to_initial"] = cap.kl_to(reference)
    return kept, stats


class StepUndo:
    """The weights ``optimizer`` steps and its state before one step, restorable bit for bit: a plain copy
    (``take()``) put back with the optimiser's own ``load_state_dict`` (``restore()``), which also restores the
    absence of state for a parameter not stepped yet and the groups' hyperparameters."""

    def __init__(self, optimizer: torch.optim.Optimizer):
        self.optimizer = optimizer
        self._weights: list[torch.Tensor] = []
        self._state: dict = {}

    def take(self) -> None:
        self._weights = [p.detach().clone() for p in optimizer_params(self.optimizer)]
        saved = self.optimizer.state_dict()  # tensors cloned one by one: 0.25 ms for the tiny simulator, deepcopy 1.1
        self._state = {"state": {index: {key: value.clone() if torch.is_tensor(value) else copy.deepcopy(value)
                                         for key, value in values.items()}
                                 for index, values in saved["state"].items()},
                       "param_groups": copy.deepcopy(saved["param_groups"])}

    def restore(self) -> None:
        with torch.no_grad():
            for param, saved in zip(optimizer_params(self.optimizer), self._weights):
                param.copy_(saved)
        self.optimizer.load_state_dict(self._state)
