"""The max-KL cap of one simulator update, shared by RWR and the policy-gradient update.

Before the update, the policy's log-probs on a fixed set of sequences are kept (no model copy). After each
optimiser step the per-sequence KL of the policy to them is measured (k3 estimator, summed over tokens, mean
over sequences); a step that takes it past ``max_kl`` is undone (weights and optimiser state restored) and the
update stops, so a kept update never exceeds the cap.
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
    policy.model.eval()
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
            self._saved = ([p.detach().clone() for p in self.policy.trainable_parameters()],
                           copy.deepcopy(self.optimizer.state_dict()))

    def keep_step(self) -> bool:
        if not self.start_logps:
            return True
        update_kl = set_kl(self.policy, self.batches, self.start_logps)
        if update_kl <= self.max_kl:
            self.update_kl = update_kl
            return True
        weights, optimizer_state = self._saved  # (a NaN KL is past the cap too)
        with torch.no_grad():
            for param, saved in zip(self.policy.trainable_parameters(), weights):
                param.copy_(saved)
        self.optimizer.load_state_dict(optimizer_state)
        self.capped, self.rejected_kl = 1, update_kl
        return False

    def kl_to(self, reference) -> float:
        """The policy's KL to ``reference`` on the watched set (after the update: its KL to the initial one)."""
        return set_kl(self.policy, self.batches, logprobs_on(reference, self.batches))
