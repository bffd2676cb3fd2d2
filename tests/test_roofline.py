"""benchmarks/roofline.py's arithmetic (issue 60, item 1): the roofline and the FLOP and byte counts, by hand and
against torch's own FLOP counter on a tiny Llama."""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from roofline import Shape, attainable, attention_flops, forward_flops, kv_cache_bytes, linear_flops_per_token  # noqa: E402

TINY = Shape(layers=2, hidden=8, heads=2, kv_heads=1, head_dim=4, intermediate=16, vocab=32)


def test_the_roofline_is_the_lower_of_the_two_roofs():
    assert attainable(2.0, compute_roof=100e9, bandwidth=10e9) == 20e9    # memory-bound
    assert attainable(50.0, compute_roof=100e9, bandwidth=10e9) == 100e9  # compute-bound


def test_counts_by_hand():
    # per layer: q 8x8, k and v 8x4 each, o 8x8, MLP 3 x 8x16 = 64 + 64 + 64 + 384 = 576; 2 layers + head 32x8
    assert TINY.parameters == 2 * 576 + 256
    assert linear_flops_per_token(TINY) == 2 * 2 * 576
    # a prefill of 3 positions: 1 + 2 + 3 keys; each key 4 x (2 heads x 4) FLOPs per layer
    assert attention_flops(TINY, 3, 0, causal_block=True) == 2 * 4 * 8 * 6
    # a decode step of 5 sequences with 10 cached positions each: 11 keys each
    assert attention_flops(TINY, 5, 10, causal_block=False) == 2 * 4 * 8 * 55
    assert forward_flops(TINY, 5, 2, 100) == 5 * 2304 + 2 * 2 * 8 * 32 + 100
    assert kv_cache_bytes(TINY, sequences=3, positions=7, element_bytes=4) == 2 * 2 * 1 * 4 * 3 * 7 * 4


def test_a_decode_step_counts_what_torch_counts():
    """One decode step of 3 sequences after 6 cached positions, the logits of every sequence: the analytic count
    equals torch.utils.flop_counter's (eager attention, whose products are counted matrix multiplies)."""
    transformers = pytest.importorskip("transformers")
    from torch.utils.flop_counter import FlopCounterMode
    config = transformers.LlamaConfig(vocab_size=TINY.vocab, hidden_size=TINY.hidden,
                                      intermediate_size=TINY.intermediate, num_hidden_layers=TINY.layers,
                                      num_attention_heads=TINY.heads, num_key_value_heads=TINY.kv_heads,
                                      head_dim=TINY.head_dim, attn_implementation="eager")
    model = transformers.LlamaForCausalLM(config).eval()
    assert Shape.of(model.config) == TINY
    cache = transformers.DynamicCache()
    with torch.no_grad():
        model(input_ids=torch.ones(3, 6, dtype=torch.long), past_key_values=cache, use_cache=True)
        with FlopCounterMode(display=False) as counter:
            model(input_ids=torch.ones(3, 1, dtype=torch.long), past_key_values=cache, use_cache=True)
    assert counter.get_total_flops() == forward_flops(TINY, 3, 3, attention_flops(TINY, 3, 6, causal_block=False))


def test_a_training_phase_is_counted_with_its_passes():
    """counted_flops on genenv's GRPO step with a tiny policy: about five forward passes of multiplies (the policy's
    forward, its recomputation under gradient checkpointing, a backward of about two, the KL reference's forward)."""
    import numpy as np
    from roofline import counted_flops, training_bytes

    from genenv.algos.grpo import PolicySample, grpo_step
    from genenv.config import TinyModelConfig
    from genenv.models.tiny import build_tiny_policy
    policy = build_tiny_policy(TinyModelConfig(hidden_size=16, intermediate_size=32, num_layers=2, num_heads=2,
                                               max_positions=64), "abcdefghij", 0)
    policy.set_gradient_checkpointing(True)
    reference = policy.frozen_copy()
    shape = Shape.of(policy.model.config)
    rng = np.random.default_rng(0)
    samples = [PolicySample(rng.integers(3, 10, 10).tolist(), rng.integers(3, 10, 6).tolist(), [-2.0] * 6, a)
               for a in (1.0, -1.0, 0.5, -0.5)]
    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=1e-7)
    flops, passes = counted_flops(lambda: grpo_step(policy, reference, optimizer, samples, kl_coef=0.001,
                                                    micro_batch=2), shape, 4 * 16, 4 * 7, attention=1000)
    assert 4.5 < passes < 5.0
    assert flops == pytest.approx(passes * forward_flops(shape, 64, 28, 0) + passes * 1000, rel=1e-6)
    assert training_bytes(shape, 5.0) == 12 * shape.parameters * 4


def test_the_decode_profile_names_operators_and_their_shares():
    """--profile: the decode steps' operators by their own time, largest first; per-step milliseconds and shares
    of the steps' wall time (each share in (0, 1], the listed ones together at most about the whole)."""
    import argparse

    from roofline import decode_profile

    from genenv.config import TinyModelConfig
    from genenv.models.tiny import build_tiny_policy
    policy = build_tiny_policy(TinyModelConfig(hidden_size=16, intermediate_size=32, num_layers=2, num_heads=2,
                                               max_positions=64), "abcdefghij", 0)
    shape = Shape.of(policy.model.config)
    args = argparse.Namespace(context=8, decode_steps=4, device="cpu")
    rows = decode_profile(policy.model, shape, args, batch=3, top=5)
    assert len(rows) == 5 and all(name.startswith("aten::") or "::" in name for name, _, _ in rows)
    assert [ms for _, ms, _ in rows] == sorted((ms for _, ms, _ in rows), reverse=True)
    assert all(0 < share <= 1 for _, _, share in rows) and sum(share for _, _, share in rows) < 1.2


def test_a_training_phase_is_timed_as_a_run_takes_it_and_leaves_the_weights_as_they_were():
    """training_phase: the step timed with AdamW's state already there (a fresh AdamW fills its state with zeros
    inside the timed step), the weights the same after as before, and --profile's operators kept."""
    import argparse

    from roofline import phase_grpo

    from genenv.config import TinyModelConfig
    from genenv.models.tiny import build_tiny_policy
    policy = build_tiny_policy(TinyModelConfig(hidden_size=16, intermediate_size=32, num_layers=2, num_heads=2,
                                               max_positions=64), "abcdefghijklmnopqrstuvwxyz", 0)
    reference = policy.frozen_copy()
    shape = Shape.of(policy.model.config)
    before = {k: v.clone() for k, v in policy.model.state_dict().items()}
    args = argparse.Namespace(prompt_tokens=8, response_tokens=4, train_seqs=2, repeats=2, device="cpu")
    profile = []
    seconds, flops, nbytes = phase_grpo(policy, reference, shape, args, profile)
    assert seconds > 0 and flops > 0 and nbytes > 0
    assert all(torch.equal(before[k], v) for k, v in policy.model.state_dict().items())
    # the profile is kept: the top 8 operators by their own time (which 8 depends on the machine's load: no test
    # reads the ranking), each named, with a non-negative time and share
    assert len(profile) == 8 and all(isinstance(op, str) and ms >= 0 and share >= 0 for op, ms, share in profile)
    from roofline import operator_shares
    every = operator_shares(lambda: policy.model(torch.ones(1, 4, dtype=torch.long)), top=10_000)
    assert "aten::mm" in [op for op, _, _ in every] or "aten::addmm" in [op for op, _, _ in every]
    # every step after the first finds AdamW's state there (counted, 2 timed, profiled)
    from roofline import training_phase
    states = []
    def step(optimizer):
        states.append(len(optimizer.state))
        optimizer.zero_grad()
        sum(p.sum() for p in policy.trainable_parameters()).backward()
        optimizer.step()
    training_phase(policy, step, shape, args, 8, 4, profile=[])
    parameters = len(list(policy.trainable_parameters()))
    assert states == [0] + [parameters] * 4
    assert all(torch.equal(before[k], v) for k, v in policy.model.state_dict().items())
