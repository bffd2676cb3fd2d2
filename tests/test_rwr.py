import math

import numpy as np
import pytest
import torch

from genenv.algos.rwr import WeightedExample, rwr_update, sequence_kl, weighted_nll


def test_weighted_nll_hand_value():
    logp = torch.tensor([[-1.0, -1.0], [-2.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    # sequence NLLs 2 and 2... second masked: 2.0 ; weights 3:1 -> (3*2 + 1*2)/4 = 2
    assert weighted_nll(logp, mask, torch.tensor([3.0, 1.0])).item() == pytest.approx(2.0)
    logp = torch.tensor([[-1.0], [-3.0]])
    mask = torch.ones((2, 1))
    assert weighted_nll(logp, mask, torch.tensor([1.0, 3.0])).item() == pytest.approx((1 + 9) / 4)


def test_sequence_kl_sums_over_target_tokens():
    logp = torch.tensor([[-1.0, -1.0]])
    ref = torch.tensor([[-2.0, -1.0]])
    kl = sequence_kl(logp, ref, torch.tensor([[1.0, 1.0]]))
    assert kl.item() == pytest.approx(math.exp(-1))


def _examples(policy, weights):
    context = policy.encode_prompt("s5|1200+3400>")
    return [WeightedExample(context, policy.encode_target("1111+1111"), weights[0]),
            WeightedExample(context, policy.encode_target("9999+9999"), weights[1])]


def _logp(policy, example):
    batch = policy.build_batch([example.prompt_ids], [example.target_ids])
    with torch.no_grad():
        return policy.token_logprobs(batch)[0].sum().item()


def test_weighted_step_moves_toward_heavier_sample(tiny_policy):
    light, heavy = _examples(tiny_policy, [0.1, 0.9])
    margin_before = _logp(tiny_policy, heavy) - _logp(tiny_policy, light)
    opt = torch.optim.AdamW(tiny_policy.model.parameters(), lr=5e-3)
    margins = [margin_before]
    for call in range(5):  # each call is one pass over the set: here one step on both examples
        stats = rwr_update(tiny_policy, tiny_policy.frozen_copy(), opt, [light, heavy], steps=5, batch_size=2,
                           kl_coef=0.0, max_kl=100.0, rng=np.random.default_rng(call))
        assert stats["steps"] == 1
        margins.append(_logp(tiny_policy, heavy) - _logp(tiny_policy, light))
    assert margins[1] > margins[0]
    assert margins[-1] > margin_before + 0.1


def test_update_is_one_pass_over_the_set(tiny_policy):
    examples = _examples(tiny_policy, [0.5, 0.5]) * 3
    opt = torch.optim.AdamW(tiny_policy.model.parameters(), lr=1e-3)
    stats = rwr_update(tiny_policy, None, opt, examples, steps=10, batch_size=4, kl_coef=0.0, max_kl=100.0,
                       rng=np.random.default_rng(0))
    assert stats["steps"] == 2  # ceil(6 / 4): never more than one pass
    stats = rwr_update(tiny_policy, None, opt, examples, steps=1, batch_size=2, kl_coef=0.0, max_kl=100.0,
                       rng=np.random.default_rng(0))
    assert stats["steps"] == 1  # and never more than `steps`


def test_kl_cap_stops_update(tiny_policy):
    examples = _examples(tiny_policy, [0.0, 1.0]) * 25
    opt = torch.optim.AdamW(tiny_policy.model.parameters(), lr=0.1)
    stats = rwr_update(tiny_policy, tiny_policy.frozen_copy(), opt, examples, steps=50, batch_size=2,
                       kl_coef=0.0, max_kl=0.05, rng=np.random.default_rng(0))
    assert stats["kl_capped"] == 1
    assert 1 <= stats["steps"] < 50
    assert stats["update_kl"] > 0.05


def test_kl_penalty_is_reported_against_reference(tiny_policy):
    examples = _examples(tiny_policy, [0.5, 0.5]) * 3
    ref = tiny_policy.frozen_copy()
    opt = torch.optim.AdamW(tiny_policy.model.parameters(), lr=1e-2)
    first = rwr_update(tiny_policy, ref, opt, examples, steps=1, batch_size=2, kl_coef=0.05, max_kl=10,
                       rng=np.random.default_rng(0))
    assert first["kl"] == pytest.approx(0.0, abs=1e-6)  # identical to the reference before the first step
    later = rwr_update(tiny_policy, ref, opt, examples, steps=3, batch_size=2, kl_coef=0.05, max_kl=10,
                       rng=np.random.default_rng(1))
    assert later["kl"] > 0.0


def test_update_kl_is_measured_after_a_single_step(tiny_policy):
    examples = _examples(tiny_policy, [0.5, 0.5])
    opt = torch.optim.AdamW(tiny_policy.model.parameters(), lr=1e-2)
    stats = rwr_update(tiny_policy, None, opt, examples, steps=1, batch_size=2, kl_coef=0.0, max_kl=100.0,
                       rng=np.random.default_rng(0))
    assert stats["steps"] == 1 and stats["update_kl"] > 0.0
