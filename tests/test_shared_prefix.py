"""Issue 40, item 1: shared-prefix GRPO. A group's common prompt is encoded once; the contract is the unshared
computation's log-probs, loss and gradients within floating-point tolerance."""

import numpy as np
import pytest
import torch

from genenv.algos.grpo import PolicySample, grpo_step
from genenv.models.packing import common_prefix_length, pack_groups


def test_common_prefix_length_hand_values():
    assert common_prefix_length([[1, 2, 3], [1, 2, 4], [1, 2]]) == 2
    assert common_prefix_length([[5, 6], [5, 6]]) == 2
    assert common_prefix_length([[1], [2]]) == 0 and common_prefix_length([]) == 0


def test_pack_groups_by_hand():
    """Prompt [7, 8] shared by two members; member 1 has one more prompt token (a later turn). Row: 7 8 | 3 4 |
    9 5; the prefix once, each member's tokens after it with positions continuing from the prefix."""
    packed = pack_groups([[([7, 8], [3, 4, 6]), ([7, 8, 9], [5, 2])]], pad_id=0)
    assert packed.input_ids.tolist() == [[7, 8, 3, 4, 9, 5]]
    assert packed.position_ids.tolist() == [[0, 1, 2, 3, 2, 3]]
    allowed = packed.allowed[0].astype(int)
    assert allowed.tolist() == [[1, 0, 0, 0, 0, 0],
                                [1, 1, 0, 0, 0, 0],
                                [1, 1, 1, 0, 0, 0],
                                [1, 1, 1, 1, 0, 0],
                                [1, 1, 0, 0, 1, 0],   # member 1 sees the prefix and itself, not member 0
                                [1, 1, 0, 0, 1, 1]]
    # member 0's tokens 3, 4, 6 are predicted at columns 1 (the prefix's last), 2, 3; member 1's 5, 2 at 4, 5
    assert packed.keep.tolist() == [[False, True, True, True, True, True]]
    assert packed.logit_index.tolist() == [[0, 1, 2], [3, 4, 0]]
    assert packed.response_ids.tolist() == [[3, 4, 6], [5, 2, 0]]
    assert packed.response_mask.tolist() == [[1, 1, 1], [1, 1, 0]]


def test_padding_columns_attend_to_themselves_only():
    packed = pack_groups([[([1, 2], [3])], [([4, 5, 6], [7, 8])]], pad_id=0)
    assert packed.input_ids.tolist() == [[1, 2, 0, 0], [4, 5, 6, 7]]
    assert packed.allowed[0, 2].tolist() == [False, False, True, False]
    assert packed.allowed[0, 3].tolist() == [False, False, False, True]


def _groups(rng, vocab: int, multi_turn: bool):
    groups = []
    for _ in range(3):
        prompt = rng.integers(4, vocab, size=int(rng.integers(3, 9))).tolist()
        members = []
        for _ in range(4):
            turn = rng.integers(4, vocab, size=int(rng.integers(0, 4))).tolist() if multi_turn else []
            members.append((prompt + turn, rng.integers(4, vocab, size=int(rng.integers(1, 6))).tolist()))
        groups.append(members)
    return groups


def _smollm2_shaped(tiny_policy):
    """SmolLM2-135M's layer (hidden 576, 9 query heads over 3 key-value heads, rope theta 1e5, tied embeddings,
    its 49,152-token vocabulary), two layers, random weights, behind the tiny policy's interface."""
    from transformers import LlamaConfig, LlamaForCausalLM
    config = LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=2,
                         num_attention_heads=9, num_key_value_heads=3, rope_theta=100000.0, rms_norm_eps=1e-5,
                         tie_word_embeddings=True, max_position_embeddings=2048, pad_token_id=0)
    torch.manual_seed(0)
    tiny_policy.model = LlamaForCausalLM(config)
    return tiny_policy


@pytest.mark.parametrize("architecture", ["tiny", "tiny-eager", "smollm2"])
@pytest.mark.parametrize("multi_turn", [False, True])
def test_packed_logprobs_and_gradients_equal_the_unshared(tiny_policy, architecture, multi_turn):
    """sdpa takes the mask as booleans, eager attention as an additive mask: both give the unshared numbers."""
    policy = _smollm2_shaped(tiny_policy) if architecture == "smollm2" else tiny_policy
    if architecture == "tiny-eager":
        policy.model.set_attn_implementation("eager")
        assert policy.model.config._attn_implementation == "eager"
    vocab = 49152 if architecture == "smollm2" else 15
    groups = _groups(np.random.default_rng(1), vocab, multi_turn)
    flat = [sample for group in groups for sample in group]
    policy.set_training(True)
    batch = policy.build_batch([p for p, _ in flat], [r for _, r in flat])
    unshared, unshared_entropy = policy.token_logprobs(batch, with_entropy=True)
    packed = pack_groups(groups, policy.tokenizer.pad_token_id)
    shared, shared_entropy = policy.packed_token_logprobs(packed, with_entropy=True)
    mask = batch.response_mask
    assert torch.equal(mask, torch.from_numpy(packed.response_mask))
    assert packed.columns < batch.input_ids.numel()             # the prompts were run once per group
    torch.testing.assert_close(shared * mask, unshared * mask, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(shared_entropy * mask, unshared_entropy * mask, rtol=1e-5, atol=1e-5)
    params = [p for p in policy.model.parameters() if p.requires_grad]
    weights = torch.linspace(-1, 1, mask.numel()).reshape(mask.shape)   # a loss that weighs every token apart
    grads_unshared = torch.autograd.grad((unshared * mask * weights).sum(), params)
    grads_shared = torch.autograd.grad((shared * mask * weights).sum(), params)
    for a, b in zip(grads_unshared, grads_shared):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)


def _samples(policy, groups, seed=0):
    rng = np.random.default_rng(seed)
    samples, sizes = [], []
    for group in groups:
        advantages = rng.normal(size=len(group))
        for (prompt, response), advantage in zip(group, advantages):
            old = (rng.normal(size=len(response)) * 0.3 - 2.0).tolist()   # ratios away from 1: clipping binds
            samples.append(PolicySample(prompt, response, old, float(advantage)))
        sizes.append(len(group))
    return samples, sizes


@pytest.mark.parametrize("setting", ["plain", "micro_batches", "lora", "gradient_checkpointing"])
def test_a_shared_prefix_grpo_step_is_the_unshared_step(tiny_policy, setting):
    """The same loss, statistics and weights after one step (SGD: the step is the gradient), with micro-batches
    (whole groups each), LoRA adapters and gradient checkpointing."""
    policy = tiny_policy
    if setting == "lora":
        policy.apply_lora(rank=4, seed=0)
    if setting == "gradient_checkpointing":
        policy.set_gradient_checkpointing(True)
    groups = _groups(np.random.default_rng(2), 15, multi_turn=True)
    samples, sizes = _samples(policy, groups)
    micro_batch = 5 if setting == "micro_batches" else 0
    params = [p for p in policy.model.parameters() if p.requires_grad]
    start = [p.detach().clone() for p in params]
    reference = policy.frozen_copy()
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():   # a reference apart from the policy: the KL term and its gradient are not zero
        for param in reference.model.parameters():
            param.add_(0.05 * torch.randn(param.shape, generator=generator))
    results = []
    for shared in (False, True):
        with torch.no_grad():
            for param, value in zip(params, start):
                param.copy_(value)
        optimizer = torch.optim.SGD(params, lr=0.1)
        stats = grpo_step(policy, reference, optimizer, samples, kl_coef=0.1, entropy_coef=0.01,
                          micro_batch=micro_batch, shared_prefix=shared, group_sizes=sizes)
        results.append((stats, [p.detach().clone() for p in params]))
    (unshared, unshared_weights), (shared, shared_weights) = results
    for key in ("loss", "kl", "clip_fraction", "entropy", "grad_norm"):
        assert shared[key] == pytest.approx(unshared[key], rel=1e-5, abs=1e-6), key
    assert unshared["clip_fraction"] > 0 and unshared["kl"] > 0 and shared["skipped"] == 0
    for a, b, s in zip(unshared_weights, shared_weights, start):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
    assert any(not a.equal(s) for a, s in zip(unshared_weights, start))


def test_groups_default_to_runs_of_one_prompt(tiny_policy):
    """Without group sizes, consecutive samples with one identical prompt form a group; sizes that do not cut the
    samples are refused."""
    from genenv.algos.grpo import _split_groups
    samples = [PolicySample([1, 2], [3], [-1.0], 1.0), PolicySample([1, 2], [4], [-1.0], -1.0),
               PolicySample([1, 5], [3], [-1.0], 1.0)]
    assert [len(g) for g in _split_groups(samples, None)] == [2, 1]
    with pytest.raises(ValueError, match="group_sizes"):
        _split_groups(samples, [2, 2])


@pytest.mark.slow
def test_a_run_with_the_fast_paths_gives_todays_metrics(tmp_path):
    """The smoke preset today, with agent.shared_prefix, and with prefix-cached sampling for both players: every
    metric the same (the sampled rollouts, the pools, success), the losses, KL and entropy equal up to
    floating-point summation order."""
    from genenv.coevolve import run
    from genenv.config import load_config
    from genenv.io import read_jsonl
    from genenv.metrics import TIMING_KEYS
    variants = {"today": [], "shared_prefix": ["agent.shared_prefix=true"],
                "prefix_cached": ["prefix_cached_sampling=true"]}
    rows = {}
    for name, overrides in variants.items():
        folder = run(load_config("smoke", overrides), tmp_path / name, log=lambda _: None)
        rows[name] = [{k: v for k, v in row.items() if k not in TIMING_KEYS}
                      for row in read_jsonl(folder / "metrics.jsonl")]
    assert len(rows["today"]) == 3 and any(row["agent_updates"] for row in rows["today"])
    # the simulator's update scores its samples' old log-probs from the cached prefill too: its loss and KL agree up
    # to the same rounding (1e-9 relative on one machine, 0 on another)
    floats = ("agent_loss", "agent_kl", "entropy", "clip_fraction", "env_loss", "env_kl_to_initial", "env_update_kl")
    for name in ("shared_prefix", "prefix_cached"):
        for today, fast in zip(rows["today"], rows[name]):
            assert {k: v for k, v in today.items() if k not in floats} == {k: v for k, v in fast.items()
                                                                            if k not in floats}, name
            for key in floats:
                assert (today[key] is None) == (fast[key] is None)
                if today[key] is not None:
                    assert fast[key] == pytest.approx(today[key], rel=1e-2, abs=1e-6), (name, key)
