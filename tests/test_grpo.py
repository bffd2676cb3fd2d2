import math

import numpy as np
import pytest
import torch

from genenv.algos.grpo import (
    PolicySample,
    clipped_surrogate,
    group_advantages,
    grpo_loss,
    grpo_step,
    is_informative,
    k3_kl,
)


def test_group_advantages_hand_values():
    # rewards 1,0,0,1: mean 0.5, population std 0.5 -> +-1
    np.testing.assert_allclose(group_advantages([1, 0, 0, 1]), [1, -1, -1, 1], atol=1e-5)
    # 1,0,0,0: mean .25, std sqrt(3)/4
    std = math.sqrt(3) / 4
    np.testing.assert_allclose(group_advantages([1, 0, 0, 0]), [0.75 / std, -0.25 / std, -0.25 / std,
                                                                -0.25 / std], rtol=1e-5)


def test_zero_variance_group_has_zero_advantage():
    np.testing.assert_array_equal(group_advantages([1, 1, 1]), [0, 0, 0])
    assert not is_informative([1, 1, 1]) and not is_informative([0.0, 0.0])
    assert is_informative([0, 1])


def test_k3_kl_zero_at_equality_and_positive():
    logp = torch.tensor([-1.0, -2.0])
    assert torch.allclose(k3_kl(logp, logp), torch.zeros(2))
    value = k3_kl(torch.tensor([-1.0]), torch.tensor([-2.0]))
    # exp(-1) - (-1) - 1 = exp(-1)
    assert value.item() == pytest.approx(math.exp(-1))


def test_clipped_surrogate_hand_values():
    logp = torch.log(torch.tensor([[1.5, 0.5]]))
    old = torch.zeros((1, 2))
    loss, clip_active, _ = clipped_surrogate(logp, old, torch.tensor([1.0]), clip_eps=0.2)
    # positive advantage: min(1.5, 1.2) = 1.2 (clipped); min(0.5, 0.8) = 0.5 (unclipped)
    np.testing.assert_allclose(loss.numpy(), [[-1.2, -0.5]], rtol=1e-6)
    np.testing.assert_array_equal(clip_active.numpy(), [[1.0, 0.0]])
    loss, clip_active, _ = clipped_surrogate(logp, old, torch.tensor([-1.0]), clip_eps=0.2)
    # negative advantage: min(-1.5, -1.2) = -1.5 ; min(-0.5, -0.8) = -0.8 (clipped)
    np.testing.assert_allclose(loss.numpy(), [[1.5, 0.8]], rtol=1e-6)
    np.testing.assert_array_equal(clip_active.numpy(), [[0.0, 1.0]])


def test_grpo_loss_is_token_level_mean_over_mask():
    logp = torch.zeros((2, 3))
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    loss, stats = grpo_loss(logp, logp, None, torch.tensor([1.0, -3.0]), mask, kl_coef=0.0)
    # ratio 1 everywhere: token losses -1,-1,-1 and +3 -> mean over 4 tokens = 0
    assert loss.item() == pytest.approx(0.0)
    assert stats["clip_fraction"] == 0.0


def _sample(policy, prompt, response, advantage):
    prompt_ids = policy.encode_prompt(prompt)
    response_ids = policy.encode_target(response)
    batch = policy.build_batch([prompt_ids], [response_ids])
    with torch.no_grad():
        logp, _ = policy.token_logprobs(batch)
    return PolicySample(prompt_ids, response_ids, logp[0].tolist(), advantage), batch


def test_grpo_step_raises_logprob_of_positive_advantage(tiny_policy):
    good, good_batch = _sample(tiny_policy, "12+34=", "46", 1.0)
    bad, bad_batch = _sample(tiny_policy, "12+34=", "99", -1.0)
    before_good = sum(good.old_logprobs)
    before_bad = sum(bad.old_logprobs)
    ref = tiny_policy.frozen_copy()
    opt = torch.optim.AdamW(tiny_policy.model.parameters(), lr=1e-2)
    stats = grpo_step(tiny_policy, ref, opt, [good, bad])
    assert stats["skipped"] == 0 and stats["clip_fraction"] == 0.0
    with torch.no_grad():
        after_good = tiny_policy.token_logprobs(good_batch)[0].sum().item()
        after_bad = tiny_policy.token_logprobs(bad_batch)[0].sum().item()
    assert after_good > before_good
    assert after_bad < before_bad


def test_grpo_step_skips_nonfinite_loss(tiny_policy):
    sample, _ = _sample(tiny_policy, "1+1=", "2", float("nan"))
    weights = [p.detach().clone() for p in tiny_policy.model.parameters()]
    opt = torch.optim.AdamW(tiny_policy.model.parameters(), lr=1e-2)
    with pytest.warns(RuntimeWarning):
        stats = grpo_step(tiny_policy, None, opt, [sample])
    assert stats["skipped"] == 1
    for before, after in zip(weights, tiny_policy.model.parameters()):
        assert torch.equal(before, after)


def test_an_update_leaves_no_gradients_behind(tiny_policy):
    """The gradients are freed right after the optimiser step, so they never sit in memory while the other
    player generates or trains."""
    sample, _ = _sample(tiny_policy, "12+34=", "46", 1.0)
    opt = torch.optim.AdamW(tiny_policy.model.parameters(), lr=1e-2)
    assert grpo_step(tiny_policy, None, opt, [sample, _sample(tiny_policy, "12+34=", "9", -1.0)[0]])["skipped"] == 0
    assert all(p.grad is None for p in tiny_policy.model.parameters())
    assert opt.state  # (the step happened: AdamW holds its moments)


def test_micro_batches_take_the_same_step_as_the_whole_minibatch(tiny_policy):
    """Forward/backward two samples at a time and accumulate: the same token-mean loss, statistics, gradient
    and weights after the step as one pass over all five (up to floating-point summation order)."""
    pairs = [("12+34=", "46", 1.0), ("12+34=", "9", -1.0), ("5+5=", "10", 0.5), ("7+80=", "87", -0.5),
             ("333+1=", "3334", 1.5)]
    samples = [_sample(tiny_policy, p, r, a)[0] for p, r, a in pairs]
    samples[0].old_logprobs = [v - 0.3 for v in samples[0].old_logprobs]  # ratios away from 1: clipping binds
    start = [p.detach().clone() for p in tiny_policy.model.parameters()]
    results = []
    for micro_batch in (0, 2):
        with torch.no_grad():
            for param, value in zip(tiny_policy.model.parameters(), start):
                param.copy_(value)
        ref = tiny_policy.frozen_copy()
        opt = torch.optim.SGD(tiny_policy.model.parameters(), lr=0.1)  # the step is the gradient itself
        stats = grpo_step(tiny_policy, ref, opt, samples, kl_coef=0.1, entropy_coef=0.01, micro_batch=micro_batch)
        results.append((stats, [p.detach().clone() for p in tiny_policy.model.parameters()]))
    (whole, whole_weights), (micro, micro_weights) = results
    for key in ("loss", "kl", "clip_fraction", "entropy", "grad_norm"):
        assert micro[key] == pytest.approx(whole[key], rel=1e-5, abs=1e-7), key
    assert whole["clip_fraction"] > 0 and whole["skipped"] == micro["skipped"] == 0
    for a, b, s in zip(whole_weights, micro_weights, start):
        assert torch.allclose(a, b, atol=1e-6) and not a.equal(s)


def test_micro_batches_group_samples_of_like_length(tiny_policy, monkeypatch):
    """Micro-batches are cut from the samples sorted by length (a multi-turn minibatch mixes 100- and 500-token
    turns; each micro-batch pads only to its own longest), and every sample is in exactly one."""
    from genenv.algos import grpo
    texts = [("1" * n + "+1=", "2", (-1.0) ** n) for n in (9, 1, 5, 2, 8, 3, 7)]
    samples = [_sample(tiny_policy, p, r, a)[0] for p, r, a in texts]
    chunks = []
    micro_loss = grpo._grpo_micro_loss

    def recording(policy, reference, chunk, *args):
        chunks.append([len(s.prompt_ids) + len(s.response_ids) for s in chunk])
        return micro_loss(policy, reference, chunk, *args)
    monkeypatch.setattr(grpo, "_grpo_micro_loss", recording)
    opt = torch.optim.SGD(tiny_policy.model.parameters(), lr=0.0)
    grpo.grpo_step(tiny_policy, None, opt, samples, micro_batch=3)
    lengths = sorted(len(s.prompt_ids) + len(s.response_ids) for s in samples)
    assert chunks == [lengths[0:3], lengths[3:6], lengths[6:7]]


def test_a_nonfinite_micro_batch_skips_the_whole_step(tiny_policy):
    good, _ = _sample(tiny_policy, "1+1=", "2", 1.0)
    bad, _ = _sample(tiny_policy, "1+2=", "3", float("nan"))
    weights = [p.detach().clone() for p in tiny_policy.model.parameters()]
    opt = torch.optim.AdamW(tiny_policy.model.parameters(), lr=1e-2)
    with pytest.warns(RuntimeWarning):
        stats = grpo_step(tiny_policy, None, opt, [good, bad], micro_batch=1)
    assert stats["skipped"] == 1 and all(p.grad is None for p in tiny_policy.model.parameters())
    for before, after in zip(weights, tiny_policy.model.parameters()):
        assert torch.equal(before, after)


def test_warmup_lr_rises_linearly_from_the_optimizers_own_step_count():
    from genenv.algos.optim import optimizer_steps, warmup_lr
    weight = torch.nn.Parameter(torch.ones(3))
    opt = torch.optim.AdamW([weight], lr=123.0)
    rates = []
    for _ in range(6):
        rates.append(warmup_lr(opt, 1e-3, 4))
        assert opt.param_groups[0]["lr"] == rates[-1]
        weight.grad = torch.ones(3)
        opt.step()
    assert rates == pytest.approx([2.5e-4, 5e-4, 7.5e-4, 1e-3, 1e-3, 1e-3])
    assert optimizer_steps(opt) == 6
    # a fresh optimiser loaded with this one's state (a resumed run) continues the schedule where it was
    resumed = torch.optim.AdamW([weight], lr=1e-3)
    fresh_state = torch.optim.AdamW([weight], lr=1e-3)
    assert warmup_lr(fresh_state, 1e-3, 8) == pytest.approx(1.25e-4)
    resumed.load_state_dict(opt.state_dict())
    assert warmup_lr(resumed, 1e-3, 8) == pytest.approx(1e-3 * 7 / 8)
    assert warmup_lr(resumed, 1e-3, 0) == 1e-3  # no warmup


def test_grpo_step_with_warmup_moves_the_weights_less_on_its_first_step(tiny_policy):
    sample, _ = _sample(tiny_policy, "12+34=", "46", 1.0)
    other, _ = _sample(tiny_policy, "12+34=", "99", -1.0)
    start = [p.detach().clone() for p in tiny_policy.model.parameters()]
    moved = {}
    for warmup in (0, 10):
        with torch.no_grad():
            for p, w in zip(tiny_policy.model.parameters(), start):
                p.copy_(w)
        opt = torch.optim.AdamW(tiny_policy.model.parameters(), lr=1e-2)
        stats = grpo_step(tiny_policy, None, opt, [sample, other], lr=1e-2, warmup_steps=warmup)
        assert stats["lr"] == pytest.approx(1e-2 / (10 if warmup else 1))
        moved[warmup] = max((p.detach() - w).abs().max().item() for p, w in zip(tiny_policy.model.parameters(),
                                                                               start))
    # AdamW's first step moves a weight by about lr whatever the gradient: warmup divides it by 10
    assert moved[0] == pytest.approx(1e-2, rel=0.05) and moved[10] == pytest.approx(1e-3, rel=0.05)


def test_is_informative_on_a_list_agrees_with_the_array_path():
    cases = [[1.0, 0.0], [1.0, 1.0], [0.5], [], [0, 1], [True, False], [0.2, 0.2, 0.2000001],
             [float("nan"), 1.0], [1.0, float("nan")], [float("nan"), float("nan")]]
    for rewards in cases:
        assert is_informative(rewards) == is_informative(np.array(rewards, dtype=float)), rewards
    assert not is_informative([1.0, float("nan"), 0.0])   # a NaN reward: numpy's answer, no signal


def test_trls_advantage_scaling_hand_values():
    """agent.advantage_scaling=trl: the sample standard deviation (ddof 1) and eps 1e-4, as TRL's GRPOTrainer."""
    # rewards 1,0,0,1: mean 0.5, sample std sqrt((4 x 0.25) / 3) = 0.57735
    std = math.sqrt(1 / 3)
    np.testing.assert_allclose(group_advantages([1, 0, 0, 1], "trl"), [0.5 / (std + 1e-4), -0.5 / (std + 1e-4),
                                                                       -0.5 / (std + 1e-4), 0.5 / (std + 1e-4)])
    np.testing.assert_array_equal(group_advantages([1, 1, 1], "trl"), [0, 0, 0])
    assert group_advantages([0.0, 1.0], "trl")[1] == pytest.approx(0.5 / (math.sqrt(0.5) + 1e-4))
