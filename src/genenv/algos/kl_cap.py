"""The max-KL cap of one simulator update, shared by RWR and the policy-gradient update.

Before the update, the policy's log-probs on a fixed set of sequences are kept (no model copy). After each
optimiser step the per-sequence KL of the policy to them is measured (k3 estimator, summed over tokens, mean
over sequences); a step that takes it past ``max_kl`` is undone (weights and optimiser state restored) and the
update stops, so a kept update never exceeds the cap. What a step may have to give back is copied into buffers
kept for the whole update (:class:`StepSnapshot`), not deep-copied anew before every step.
"""

from __future__ import annotations

import copy

import torch

from genenv.algos.grpo import k3_kl


def sequence_kl(logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """k3 estimate of KL(pi || ref) per sequence, summed over target tokens: [B]."""
    return (k3_kl(logp, ref_logp) * mask).sum(-1)


def set_kl(policy, batches, other_logps) -> float:
    """Mean per-sequence KL between ``policy`` now and the log-probs ``other_logps`` on ``batches``."""
    kls = [sequence_kl(now, other, batch.response_mask)
           for batch, now, other in zip(batches, logprobs_on(policy, batches), other_logps)]
    return torch.cat(kls).mean().item()


def logprobs_on(policy, batches) -> list[torch.Tensor]:
    """The policy's per-token log-probs on ``batches``, in eval mode and without gradients."""
    policy.set_training(False)
    with torch.no_grad():
        return [policy.token_logprobs(batch)[0] for batch in batches]


class KLCap:
    """Watch one update of ``policy`` on ``batches`` (SequenceBatch): ``before_step()`` then, after the optimiser
    step, ``keep_step()`` (False: the step passed ``max_kl`` and was undone; stop). ``max_kl`` 0: no cap."""

    def __init__(self, policy, optimizer, batches, max_kl: float):
        self.policy, self.optimizer, self.batches, self.max_kl = policy, optimizer, batches, max_kl
        self.start_logps = logprobs_on(policy, batches) if max_kl > 0 else []
        self.update_kl, self.capped, self.rejected_kl = 0.0, 0, None
        self._saved = None

    def before_step(self) -> None:
        if self.start_logps:  # the trainable weights and the optimiser state, to undo the step
            if self._saved is None:
                self._saved = StepSnapshot(list(self.policy.trainable_parameters()), self.optimizer)
            self._saved.take()

    def keep_step(self) -> bool:
        if not self.start_logps:
            return True
        update_kl = set_kl(self.policy, self.batches, self.start_logps)
        if update_kl <= self.max_kl:
            self.update_kl = update_kl
            return True
        self._saved.restore()  # (a NaN KL is past the cap too)
        self.capped, self.rejected_kl = 1, update_kl
        return False

    def kl_to(self, reference) -> float:
        """The policy's KL to ``reference`` on the watched set (after the update: its KL to the initial one)."""
        return set_kl(self.policy, self.batches, logprobs_on(reference, self.batches))


class StepSnapshot:
    """The weights ``params`` and ``optimizer``'s state before one step, restorable bit for bit.

    ``take()`` copies them into buffers allocated on the first call and reused after (a deep copy of the
    optimiser's state dict before every step cost more than the tiny models' whole step); ``restore()`` puts
    them back, including the absence of state for a parameter the optimiser had not stepped yet, so the next
    step starts exactly where the undone one did."""

    def __init__(self, params: list[torch.Tensor], optimizer: torch.optim.Optimizer):
        self.params, self.optimizer = params, optimizer
        self._weights: list[torch.Tensor] | None = None
        self._buffers: dict[tuple[int, str], torch.Tensor] = {}
        self._state: dict[torch.Tensor, dict] = {}
        self._groups: list[dict] = []

    def _optimised(self):
        return [p for group in self.optimizer.param_groups for p in group["params"]]

    def take(self) -> None:
        with torch.no_grad():
            if self._weights is None:
                self._weights = [p.detach().clone() for p in self.params]
            else:
                torch._foreach_copy_(self._weights, [p.detach() for p in self.params])
        self._state = {}
        for index, param in enumerate(self._optimised()):
            state = self.optimizer.state.get(param)
            if not state:
                continue
            saved = {}
            for key, value in state.items():
                if torch.is_tensor(value):
                    buffer = self._buffers.get((index, key))
                    if buffer is None or buffer.shape != value.shape or buffer.dtype != value.dtype:
                        buffer = self._buffers[(index, key)] = value.detach().clone()
                    else:
                        buffer.copy_(value)
                    saved[key] = buffer
                else:
                    saved[key] = copy.deepcopy(value)
            self._state[param] = saved
        self._groups = [{k: copy.deepcopy(v) for k, v in group.items() if k != "params"}
                        for group in self.optimizer.param_groups]

    def restore(self) -> None:
        with torch.no_grad():
            torch._foreach_copy_([p.detach() for p in self.params], self._weights)
            for param in self._optimised():
                saved = self._state.get(param)
                if saved is None:
                    self.optimizer.state.pop(param, None)
                    continue
                state = self.optimizer.state[param]
                for key in [k for k in state if k not in saved]:
                    del state[key]
                for key, value in saved.items():
                    current = state.get(key)
                    if torch.is_tensor(value) and torch.is_tensor(current) and current.shape == value.shape:
                        current.copy_(value)
                    else:
                        state[key] = value.clone() if torch.is_tensor(value) else copy.deepcopy(value)
        for group, saved_group in zip(self.optimizer.param_groups, self._groups):
            group.update(copy.deepcopy(saved_group))
