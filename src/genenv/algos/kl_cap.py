"""The max-KL cap of one simulator update, shared by RWR and the policy-gradient update.

Before the update, the policy's log-probs on a fixed set of sequences are kept (no model copy). After each
optimiser step the KL(start || now) of the policy at the start of the update to the policy now is estimated on
them (:func:`update_kl`: k3 with the start as the sampling side, summed over tokens, mean over sequences); a step
that takes it past ``max_kl`` is undone (weights and optimiser state restored) and the update stops, so a kept
update never exceeds the cap. The sequences are what the simulator sampled before the update (RWR with
``env.rwr.pool_replay`` adds earlier epochs' samples), so the estimate is unbiased for KL(start || now) on the
simulator's own samples. (Before issue 42 it computed k3(now, start), an estimate of KL(now || start) only for
tokens sampled from the updated policy, which these are not.) What a step may have to give back is copied into buffers
kept for the whole update (:class:`StepSnapshot`), not deep-copied anew before every step.
"""

from __future__ import annotations

import copy
import weakref

import torch

from genenv.algos.grpo import k3_kl
from genenv.algos.optim import optimizer_params


def sequence_kl(logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """k3 estimate of KL(pi || ref) per sequence, summed over target tokens: [B]. ``logp`` is pi's, the policy that
    sampled the tokens (the estimate is unbiased only then)."""
    return (k3_kl(logp, ref_logp) * mask).sum(-1)


def update_kl(policy, batches, start_logps) -> float:
    """KL(start || now): the mean per-sequence k3 estimate with the start's log-probs ``start_logps`` as the
    sampling side and ``policy``'s log-probs now as the other, on ``batches`` (sampled by the start)."""
    kls = [sequence_kl(start, now, batch.response_mask)
           for batch, now, start in zip(batches, logprobs_on(policy, batches), start_logps)]
    return torch.cat(kls).mean().item()


def logprobs_on(policy, batches) -> list[torch.Tensor]:
    """The policy's per-token log-probs on ``batches``, in eval mode and without gradients."""
    policy.set_training(False)
    with torch.no_grad():
        return [policy.token_logprobs(batch)[0] for batch in batches]


class KLCap:
    """Watch one update of ``policy`` on ``batches`` (SequenceBatch): ``before_step()`` then, after the optimiser
    step, ``keep_step()`` (False: the step's KL(start || now), :func:`update_kl`, passed ``max_kl`` and it was
    undone; stop). ``max_kl`` 0: no cap."""

    def __init__(self, policy, optimizer, batches, max_kl: float):
        self.policy, self.optimizer, self.batches, self.max_kl = policy, optimizer, batches, max_kl
        self.start_logps = logprobs_on(policy, batches) if max_kl > 0 else []
        self.update_kl, self.capped, self.rejected_kl = 0.0, 0, None
        self._saved = None

    def before_step(self) -> None:
        if self.start_logps:  # the weights the optimiser steps and its state, to undo the step
            if self._saved is None:
                self._saved = snapshot_for(self.optimizer)
            self._saved.take()
            keep_if_small(self.optimizer, self._saved)

    def keep_step(self) -> bool:
        if not self.start_logps:
            return True
        kl = update_kl(self.policy, self.batches, self.start_logps)
        if kl <= self.max_kl:
            self.update_kl = kl
            return True
        self._saved.restore()  # (a NaN KL is past the cap too)
        self.capped, self.rejected_kl = 1, kl
        return False

    def kl_to(self, reference) -> float:
        """KL(``reference`` || the policy now) on the watched set, estimated like the cap's (:func:`update_kl`, with
        ``reference`` as the sampling side: unbiased when the reference sampled the set, as the start of the
        update did). After the update, with the initial simulator: ``env_kl_to_initial``."""
        return update_kl(self.policy, self.batches, logprobs_on(reference, self.batches))


KEEP_SNAPSHOT_BYTES = 64 * 2**20
_kept_snapshots: "weakref.WeakKeyDictionary[torch.optim.Optimizer, StepSnapshot]" = weakref.WeakKeyDictionary()


def snapshot_for(optimizer: torch.optim.Optimizer) -> "StepSnapshot":
    """A :class:`StepSnapshot` of the parameters ``optimizer`` steps and of its state: the one its last update
    kept (:func:`keep_if_small`), else a new one."""
    params = optimizer_params(optimizer)
    kept = _kept_snapshots.get(optimizer)
    if kept is not None and len(kept.params) == len(params) and all(a is b for a, b in zip(kept.params, params)):
        return kept
    return StepSnapshot(params, optimizer)


def keep_if_small(optimizer: torch.optim.Optimizer, snapshot: "StepSnapshot") -> None:
    """Keep a small snapshot (at most ``KEEP_SNAPSHOT_BYTES`` of buffers: the tiny models') with its optimiser, so
    the next update reuses its buffers instead of allocating them anew every epoch; a large one (a real model's
    weights and AdamW moments, gigabytes) is let go with the update, so it never sits in memory while the other
    player works."""
    if snapshot.nbytes <= KEEP_SNAPSHOT_BYTES:
        _kept_snapshots[optimizer] = snapshot
    else:
        _kept_snapshots.pop(optimizer, None)


class StepSnapshot:
    """The weights ``params`` and ``optimizer``'s state before one step, restorable bit for bit.

    ``take()`` copies them into buffers allocated on the first call and reused after (a deep copy of the
    optimiser's state dict before every step cost more than the tiny models' whole step), in one ``foreach`` copy
    for the weights and one for the optimiser's tensors (a ``copy_`` per tensor was most of the snapshot's time:
    20 weights and 60 AdamW tensors for the tiny model); the buffers are reallocated when the optimiser's state
    tensors are not the ones of the last take. ``restore()`` puts everything back, including the absence of
    state for a parameter the optimiser had not stepped yet, so the next step starts exactly where the undone
    one did."""

    def __init__(self, params: list[torch.Tensor], optimizer: torch.optim.Optimizer):
        self.params = params
        # weakly: a snapshot kept with its optimiser (keep_if_small) must not keep the optimiser alive
        self._optimizer = weakref.ref(optimizer)
        self._weights: list[torch.Tensor] | None = None
        self._sources: list[torch.Tensor] = []     # the optimiser's state tensors at the last take
        self._buffers: list[torch.Tensor] = []     # their copies
        self._layout: list[tuple[torch.Tensor, str]] = []   # (parameter, state key) of each source
        self._extra: dict[torch.Tensor, dict] = {}  # non-tensor state values, copied
        self._stateless: list[torch.Tensor] = []    # parameters without optimiser state at the last take
        self._groups: list[dict] = []

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        return self._optimizer()

    def _optimised(self):
        return optimizer_params(self.optimizer)

    def take(self) -> None:
        layout, sources, extra, stateless = [], [], {}, []
        state = self.optimizer.state
        for param in self._optimised():
            param_state = state.get(param)
            if not param_state:
                stateless.append(param)
                continue
            for key, value in param_state.items():
                if torch.is_tensor(value):
                    layout.append((param, key))
                    sources.append(value)
                else:
                    extra.setdefault(param, {})[key] = copy.deepcopy(value)
        with torch.no_grad():
            if self._weights is None:
                self._weights = [p.detach().clone() for p in self.params]
            else:
                torch._foreach_copy_(self._weights, self.params)
            same = len(sources) == len(self._sources) and all(a is b for a, b in zip(sources, self._sources))
            if not same:
                self._buffers = [value.detach().clone() for value in sources]
            elif sources:
                torch._foreach_copy_(self._buffers, sources)
        self._sources, self._layout, self._extra, self._stateless = sources, layout, extra, stateless
        self._groups = [{k: copy.deepcopy(v) for k, v in group.items() if k != "params"}
                        for group in self.optimizer.param_groups]

    @property
    def nbytes(self) -> int:
        """The bytes of the buffers the snapshot holds."""
        return sum(t.numel() * t.element_size() for t in [*(self._weights or []), *self._buffers])

    def restore(self) -> None:
        saved: dict[torch.Tensor, dict] = {param: dict(values) for param, values in self._extra.items()}
        for (param, key), buffer in zip(self._layout, self._buffers):
            saved.setdefault(param, {})[key] = buffer
        state = self.optimizer.state
        with torch.no_grad():
            torch._foreach_copy_(self.params, self._weights)
            for param in self._stateless:
                state.pop(param, None)
            for param, values in saved.items():
                current_state = state[param]
                for key in [k for k in current_state if k not in values]:
                    del current_state[key]
                for key, value in values.items():
                    current = current_state.get(key)
                    if torch.is_tensor(value) and torch.is_tensor(current) and current.shape == value.shape:
                        current.copy_(value)
                    else:
                        current_state[key] = value.clone() if torch.is_tensor(value) else copy.deepcopy(value)
        for group, saved_group in zip(self.optimizer.param_groups, self._groups):
            group.update(copy.deepcopy(saved_group))
