"""Group Relative Policy Optimisation for the agent.

Advantages are normalised within each group of rollouts of one task; the loss is the PPO clipped
surrogate plus a k3 KL penalty to the frozen initial agent, averaged over response tokens (token-level
mean, as DAPO). Groups whose rewards are all equal carry no signal: they get zero advantage and are
reported through ``effective_fraction``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from genenv.algos.optim import guarded_step, shuffled_passes, warmup_lr
from genenv.models.packing import pack_groups
from genenv.models.policy import SequenceBatch


@dataclass
class PolicySample:
    """One response to train on: tokens, the log-probs it was sampled with, and its advantage."""
    prompt_ids: list[int]
    response_ids: list[int]
    old_logprobs: list[float]
    advantage: float


# How a group's rewards are scaled into advantages, (r_i - mean) / (std + eps): the standard deviation's delta
# degrees of freedom and eps. "population": genenv's (ddof 0, eps 1e-6); "trl": TRL's GRPOTrainer with
# scale_rewards="group" (the sample standard deviation, ddof 1, as torch.std; eps 1e-4). At G = 8 the sample
# deviation is sqrt(8/7) = 1.07 times the population one: the same direction, advantages 0.94 times as large.
ADVANTAGE_SCALINGS = {"population": (0, 1e-6), "trl": (1, 1e-4)}


def group_advantages(rewards, scaling: str = "population") -> np.ndarray:
    """(r_i - mean) / (std + eps) within one group, std and eps as ``scaling`` (:data:`ADVANTAGE_SCALINGS`) says;
    all zeros when the rewards are all equal."""
    ddof, eps = ADVANTAGE_SCALINGS[scaling]
    rewards = np.asarray(rewards, dtype=float)
    if rewards.size < 2 or rewards.std() == 0.0:
        return np.zeros_like(rewards)
    return (rewards - rewards.mean()) / (rewards.std(ddof=ddof) + eps)


def is_informative(rewards) -> bool:
    """A group carries signal only when its rewards differ."""
    rewards = np.asarray(rewards, dtype=float)
    return rewards.size > 1 and float(rewards.max() - rewards.min()) > 0.0


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (values * mask).sum() / mask.sum().clamp(min=1.0)


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Low-variance KL(pi || ref) estimator per token: exp(ref - logp) - (ref - logp) - 1 >= 0."""
    log_ratio = ref_logp - logp
    return torch.exp(log_ratio) - log_ratio - 1.0


def clipped_surrogate(logp, old_logp, advantages, clip_eps: float = 0.2):
    """Per-token PPO loss -min(rho A, clip(rho, 1-eps, 1+eps) A) and a mask of tokens where clipping binds."""
    ratio = torch.exp(logp - old_logp)
    adv = advantages.unsqueeze(-1) if advantages.dim() == 1 else advantages
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * adv
    loss = -torch.minimum(unclipped, clipped)
    clip_active = (clipped < unclipped).float()
    return loss, clip_active, ratio


def grpo_loss(logp, old_logp, ref_logp, advantages, mask, clip_eps=0.2, kl_coef=0.001, entropy=None,
              entropy_coef=0.0, tokens=None):
    """Token-level mean of the clipped surrogate + kl_coef * k3 KL - entropy_coef * entropy.

    ``tokens``: divide the masked sums by this many tokens instead of by the mask's own (a micro-batch's share
    of the loss of the whole minibatch; its statistics are shares too, so they add up over micro-batches)."""
    def mean(values):
        return masked_mean(values, mask) if tokens is None else (values * mask).sum() / tokens

    surrogate, clip_active, _ = clipped_surrogate(logp, old_logp, advantages, clip_eps)
    loss = mean(surrogate)
    stats = {"clip_fraction": mean(clip_active).item()}
    if ref_logp is not None:
        kl = mean(k3_kl(logp, ref_logp))
        loss = loss + kl_coef * kl
        stats["kl"] = kl.item()
    if entropy is not None:
        ent = mean(entropy)
        loss = loss - entropy_coef * ent
        stats["entropy"] = ent.item()
    return loss, stats


@dataclass
class PreparedSamples:
    """Samples laid out as tensors: their batch (:meth:`Policy.build_batch`), old log-probs [B, R] and advantages
    [B]."""
    batch: SequenceBatch
    old_logprobs: torch.Tensor
    advantages: torch.Tensor

    def reordered(self, order: list[int]) -> "PreparedSamples":
        """All the samples in the order ``order`` (a permutation of their indices): the tensors preparing them in
        that order gives, as every row depends on its own sample alone and the padded widths on the whole set."""
        if sorted(order) != list(range(len(self.advantages))):
            raise ValueError("reordered needs a permutation of every sample (a subset pads to other widths)")
        index = torch.tensor(order, device=self.advantages.device)
        b = self.batch
        batch = SequenceBatch(b.input_ids[index], b.attention_mask[index], b.position_ids[index],
                              b.response_ids[index], b.response_mask[index], b.prompt_width)
        return PreparedSamples(batch, self.old_logprobs[index], self.advantages[index])


def prepare_samples(policy, samples: list[PolicySample], batch: SequenceBatch | None = None) -> PreparedSamples:
    """``samples`` as tensors on the policy's device (``batch``: their batch, when already built)."""
    if batch is None:
        batch = policy.build_batch([s.prompt_ids for s in samples], [s.response_ids for s in samples])
    return PreparedSamples(batch, *_old_and_advantages(policy, samples, batch.response_ids.shape[1]))


def grpo_step(policy, reference, optimizer, samples: list[PolicySample], *, clip_eps=0.2, kl_coef=0.001,
              entropy_coef=0.0, grad_clip=1.0, temperature=1.0, micro_batch: int = 0, lr: float | None = None,
              warmup_steps: int = 0, prepared: PreparedSamples | None = None, shared_prefix: bool = False,
              group_sizes: list[int] | None = None, constraint=None) -> dict:
    """One gradient step on ``samples``. A non-finite loss or gradient skips the step (``skipped``=1).

    ``prepared``: ``samples`` already laid out as tensors (:func:`prepare_samples`; used when the step takes them
    in one piece), so an update stepping on reorderings of one set builds it once.

    ``lr`` with ``warmup_steps`` > 0: the step's learning rate follows :func:`warmup_lr` (logged as ``lr``).

    ``micro_batch`` > 0: forward and backward that many samples at a time, accumulating the gradient of the same
    token-mean loss (the same step up to floating-point summation order; less activation memory). Micro-batches
    are cut from the samples sorted by length, so each pads only to its own longest sequence.

    ``shared_prefix``: each group's common prompt is encoded once (:mod:`genenv.models.packing`), for the policy
    and the KL reference; ``group_sizes`` says how many consecutive samples form each group (default: the
    samples with one identical prompt, consecutive). The same loss and gradients up to floating-point summation
    order. Micro-batches then hold whole groups (at least one), about ``micro_batch`` samples each.

    ``constraint``: the distribution the samples were drawn from (the simulator's task shape, ``env.constrained``),
    for the policy's and the reference's log-probs alike."""
    policy.set_training(True)
    stats: dict = {}
    whole = micro_batch <= 0 or micro_batch >= len(samples)
    if shared_prefix:
        grouped = _group_chunks(_split_groups(samples, group_sizes), micro_batch)
        chunks = [[s for group in chunk for s in group] for chunk in grouped]
        sizes = [[len(group) for group in chunk] for chunk in grouped]
    else:
        if whole:
            chunks = [samples]
        else:  # sequences of like length together: a chunk pads to its own longest (multi-turn prompts vary 5x)
            by_length = sorted(samples, key=lambda s: len(s.prompt_ids) + len(s.response_ids))
            chunks = [by_length[i:i + micro_batch] for i in range(0, len(by_length), micro_batch)]
        sizes = [None] * len(chunks)
    tokens = None if whole else float(max(1, sum(len(s.response_ids) for s in samples)))

    def losses():  # each micro-batch's forward runs once the previous one's backward is done
        for chunk, chunk_sizes in zip(chunks, sizes):
            part, part_stats = _grpo_micro_loss(policy, reference, chunk, tokens, clip_eps, kl_coef, entropy_coef,
                                                temperature, prepared if whole and not shared_prefix else None,
                                                chunk_sizes, constraint)
            for key, value in {**part_stats, "loss": part.item()}.items():
                stats[key] = stats.get(key, 0.0) + value
            yield part
    if lr is not None:
        stats["lr"] = warmup_lr(optimizer, lr, warmup_steps)
    grad_norm = guarded_step(policy, optimizer, losses(), grad_clip, "GRPO")
    stats.setdefault("kl", 0.0)
    stats["skipped"] = int(grad_norm is None)
    if grad_norm is not None:
        stats["grad_norm"] = grad_norm
    return stats


def _split_groups(samples: list[PolicySample], group_sizes: list[int] | None) -> list[list[PolicySample]]:
    """``samples`` cut into their groups: by ``group_sizes``, or runs of one identical prompt."""
    if group_sizes is None:
        groups: list[list[PolicySample]] = []
        for sample in samples:
            if groups and groups[-1][0].prompt_ids == sample.prompt_ids:
                groups[-1].append(sample)
            else:
                groups.append([sample])
        return groups
    if sum(group_sizes) != len(samples) or min(group_sizes, default=1) < 1:
        raise ValueError(f"group_sizes {group_sizes} do not cut {len(samples)} samples into non-empty groups")
    bounds = np.cumsum([0, *group_sizes])
    return [samples[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def _group_chunks(groups: list[list[PolicySample]], micro_batch: int) -> list[list[list[PolicySample]]]:
    """Whole groups in chunks of about ``micro_batch`` samples (all in one when ``micro_batch`` is 0), groups of
    like packed length together."""
    if micro_batch <= 0 or micro_batch >= sum(map(len, groups)):
        return [groups]
    ordered = sorted(groups, key=lambda g: sum(len(s.prompt_ids) + len(s.response_ids) for s in g))
    chunks, current = [], []
    for group in ordered:
        if current and sum(map(len, current)) + len(group) > micro_batch:
            chunks.append(current)
            current = []
        current.append(group)
    return chunks + [current]


def _old_and_advantages(policy, samples: list[PolicySample], width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The samples' old log-probs as one [B, width] tensor (one array, not a tensor per sample) and advantages."""
    old = np.zeros((len(samples), width), dtype=np.float32)
    for row, s in enumerate(samples):
        old[row, :len(s.old_logprobs)] = s.old_logprobs
    advantages = torch.tensor([s.advantage for s in samples], dtype=torch.float32, device=policy.device)
    return torch.from_numpy(old).to(policy.device), advantages


def _grpo_micro_loss(policy, reference, samples, tokens, clip_eps, kl_coef, entropy_coef, temperature,
                     prepared=None, group_sizes=None, constraint=None):
    """The loss of ``samples`` (their share of a minibatch of ``tokens`` response tokens, or their own mean);
    ``group_sizes`` given: each group's common prompt encoded once (:mod:`genenv.models.packing`)."""
    if group_sizes is not None:
        packed = pack_groups([[(s.prompt_ids, s.response_ids) for s in group]
                              for group in _split_groups(samples, group_sizes)], policy.tokenizer.pad_token_id)
        old, advantages = _old_and_advantages(policy, samples, packed.response_ids.shape[1])
        mask = torch.from_numpy(packed.response_mask).to(policy.device)

        def logprobs(model, **options):
            return model.packed_token_logprobs(packed, constraint=constraint, **options)
    else:
        prepared = prepared or prepare_samples(policy, samples)
        old, advantages, mask = prepared.old_logprobs, prepared.advantages, prepared.batch.response_mask

        def logprobs(model, **options):
            return model.token_logprobs(prepared.batch, constraint=constraint, **options)
    logp, entropy = logprobs(policy, temperature=temperature, with_entropy=True, entropy_grad=entropy_coef > 0)
    ref_logp = None
    if reference is not None and kl_coef > 0:
        with torch.no_grad():
            ref_logp, _ = logprobs(reference, temperature=temperature)
    return grpo_loss(logp, old, ref_logp, advantages, mask, clip_eps, kl_coef, entropy, entropy_coef, tokens)


def informative_samples(groups, scaling: str = "population") -> list[list[PolicySample]]:
    """GRPO samples of the informative groups of rollout episodes (every turn of an episode shares its advantage),
    the advantages scaled as ``scaling`` says (:func:`group_advantages`)."""
    informative = []
    for group in groups:
        rewards = [e.reward for e in group]
        if is_informative(rewards):
            informative.append([PolicySample(t.prompt_ids, t.response_ids, t.logprobs, float(a))
                                for e, a in zip(group, group_advantages(rewards, scaling)) for t in e.turns])
    return informative


def with_trainer_logprobs(policy, groups: list[list[PolicySample]], *, temperature: float = 1.0,
                          micro_batch: int = 0, shared_prefix: bool = False,
                          constraint=None) -> list[list[PolicySample]]:
    """The groups with every sample's old log-probs recomputed by ``policy`` now (eval mode, no gradients), whole
    groups about ``micro_batch`` samples at a time, each group's prompt encoded once with ``shared_prefix``. For
    samples another engine drew (``sampler=llama.cpp``): the importance ratio then compares the trainer with
    itself, never with the engine's arithmetic. ``constraint``: the distribution they were drawn from."""
    policy.set_training(False)
    recomputed: dict[int, list[PolicySample]] = {}   # by id of the group it replaces (chunks reorder groups)
    with torch.no_grad():
        for chunk in _group_chunks(groups, micro_batch):
            samples = [s for group in chunk for s in group]
            if shared_prefix:
                packed = pack_groups([[(s.prompt_ids, s.response_ids) for s in group] for group in chunk],
                                     policy.tokenizer.pad_token_id)
                logp, _ = policy.packed_token_logprobs(packed, temperature=temperature, constraint=constraint)
            else:
                logp, _ = policy.token_logprobs(policy.build_batch([s.prompt_ids for s in samples],
                                                                   [s.response_ids for s in samples]),
                                                temperature=temperature, constraint=constraint)
            rows = iter(logp.float().cpu().numpy())
            for group in chunk:
                recomputed[id(group)] = [PolicySample(s.prompt_ids, s.response_ids,
                                                      next(rows)[:len(s.response_ids)].tolist(), s.advantage)
                                         for s in group]
    return [recomputed[id(group)] for group in groups]


def grpo_update(policy, reference, optimizer, buffer: list[list[PolicySample]], *, rng: np.random.Generator,
                passes: int, minibatch_groups: int, recompute_old_logprobs: bool = False,
                **step_options) -> tuple[list[dict], int]:
    """``passes`` shuffled passes over the buffered groups, one :func:`grpo_step` per ``minibatch_groups``
    groups. Returns the stats of the steps taken and how many were skipped (non-finite). With
    ``recompute_old_logprobs`` the buffer's old log-probs are first recomputed by the policy
    (:func:`with_trainer_logprobs`)."""
    if recompute_old_logprobs and buffer:
        buffer = with_trainer_logprobs(policy, buffer, temperature=step_options.get("temperature", 1.0),
                                       micro_batch=step_options.get("micro_batch", 0),
                                       shared_prefix=step_options.get("shared_prefix", False))
    steps, skipped = [], 0
    minibatches = shuffled_passes(len(buffer), minibatch_groups, rng)
    for _ in range(passes * -(-len(buffer) // minibatch_groups)):
        chosen = next(minibatches)
        step = grpo_step(policy, reference, optimizer, [s for i in chosen for s in buffer[i]],
                         group_sizes=[len(buffer[i]) for i in chosen], **step_options)
        skipped += step["skipped"]
        if not step["skipped"]:
            steps.append(step)
    return steps, skipped
