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
    for call in range(5):  # one step on both examples per call
        stats = rwr_update(tiny_policy, tiny_policy.frozen_copy(), opt, [light, heavy], steps=1, batch_size=2,
                           kl_coef=0.0, max_kl=100.0, rng=np.random.default_rng(call))
        assert stats["steps"] == 1
        margins.append(_logp(tiny_policy, heavy) - _logp(tiny_policy, light))
    assert margins[1] > margins[0]
    assert margins[-1] > margin_before + 0.1


def test_steps_are_optimiser_steps_in_passes_over_the_set(tiny_policy):
    """rwr_steps means optimiser steps: a set that fits one minibatch still gets every step (it got one)."""
    examples = _examples(tiny_policy, [0.5, 0.5]) * 3
    opt = torch.optim.AdamW(tiny_policy.model.parameters(), lr=1e-4)
    stats = rwr_update(tiny_policy, None, opt, examples, steps=10, batch_size=4, kl_coef=0.0, max_kl=100.0,
                       rng=np.random.default_rng(0))
    assert stats["steps"] == 10 and stats["kl_capped"] == 0
    stats = rwr_update(tiny_policy, None, opt, examples, steps=4, batch_size=64, kl_coef=0.0, max_kl=100.0,
                       rng=np.random.default_rng(0))
    assert stats["steps"] == 4


def test_minibatches_cover_the_set_pass_by_pass():
    from genenv.algos.optim import shuffled_passes
    batches = shuffled_passes(5, 2, np.random.default_rng(0))
    first_pass = [next(batches) for _ in range(3)]
    assert [len(b) for b in first_pass] == [2, 2, 1]
    assert sorted(i for b in first_pass for i in b) == [0, 1, 2, 3, 4]
    assert sorted(i for _ in range(3) for i in next(batches)) == [0, 1, 2, 3, 4]


def test_kl_cap_undoes_the_step_that_passes_it(tiny_policy):
    """The issue's reproduction: one minibatch holds the whole set, a cap of 0.05. The cap is checked after each
    step; the step that passes it is undone, so the kept update stays under the cap."""
    examples = _examples(tiny_policy, [0.0, 1.0]) * 32
    start = {k: v.clone() for k, v in tiny_policy.model.state_dict().items()}
    opt = torch.optim.AdamW(tiny_policy.model.parameters(), lr=0.1)
    stats = rwr_update(tiny_policy, tiny_policy.frozen_copy(), opt, examples, steps=4, batch_size=64,
                       kl_coef=0.0, max_kl=0.05, rng=np.random.default_rng(0))
    assert stats["kl_capped"] == 1 and stats["rejected_kl"] > 0.05
    assert stats["steps"] == 0 and stats["update_kl"] == 0.0  # lr 0.1: the very first step passes the cap
    for key, value in tiny_policy.model.state_dict().items():  # ... and was undone
        assert value.equal(start[key]), key
    assert stats["kl_to_initial"] == pytest.approx(0.0, abs=1e-6)


def test_kl_cap_keeps_the_steps_under_it(tiny_policy):
    examples = _examples(tiny_policy, [0.0, 1.0]) * 25
    opt = torch.optim.AdamW(tiny_policy.model.parameters(), lr=3e-4)
    stats = rwr_update(tiny_policy, tiny_policy.frozen_copy(), opt, examples, steps=50, batch_size=2,
                       kl_coef=0.0, max_kl=0.05, rng=np.random.default_rng(0))
    assert stats["kl_capped"] == 1 and 1 <= stats["steps"] < 50
    assert 0.0 < stats["update_kl"] <= 0.05 < stats["rejected_kl"]
    # the reference is the simulator before the update: KL(now || start) on the update's set, moved by the kept
    # steps (its estimator: tests/test_kl_cap.py)
    assert 0.0 < stats["kl_to_initial"] < math.inf


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
    assert stats["kl_to_initial"] is None  # no reference given
