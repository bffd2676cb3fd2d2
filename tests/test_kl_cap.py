"""Optimiser state kept bit for bit: undoing a step (StepUndo) and a checkpoint's optimizer file."""

import math

import pytest
import torch

from genenv.algos.kl_cap import StepUndo


def _loss(model, scale):
    return sum((p * scale).pow(2).sum() for p in model.parameters())


def _step(model, optimizer, scale):
    optimizer.zero_grad()
    _loss(model, scale).backward()
    optimizer.step()


def _state(model, optimizer):
    weights = [p.detach().clone() for p in model.parameters()]
    opt = {i: {k: (v.clone() if torch.is_tensor(v) else v) for k, v in optimizer.state[p].items()}
           for i, p in enumerate(model.parameters()) if p in optimizer.state}
    return weights, opt


def _equal(a, b):
    (wa, oa), (wb, ob) = a, b
    if len(wa) != len(wb) or any(not x.equal(y) for x, y in zip(wa, wb)) or oa.keys() != ob.keys():
        return False
    return all(oa[i].keys() == ob[i].keys() and all(
        oa[i][k].equal(ob[i][k]) if torch.is_tensor(oa[i][k]) else oa[i][k] == ob[i][k] for k in oa[i]) for i in oa)


def _fresh(tiny_policy):
    model = tiny_policy.frozen_copy().model
    for p in model.parameters():
        p.requires_grad_(True)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2)


def test_undone_steps_leave_the_same_trajectory_as_never_taking_them(tiny_policy):
    kept_model, kept_opt = _fresh(tiny_policy)
    undo_model, undo_opt = _fresh(tiny_policy)
    snapshot = StepUndo(undo_opt)
    for step in range(3):
        _step(kept_model, kept_opt, 1.0)
        snapshot.take()
        _step(undo_model, undo_opt, 1.0)
        assert _equal(_state(kept_model, kept_opt), _state(undo_model, undo_opt))
        snapshot.take()  # a step with another loss, then undone: as if it never happened
        _step(undo_model, undo_opt, 3.0 + step)
        assert not _equal(_state(kept_model, kept_opt), _state(undo_model, undo_opt))
        snapshot.restore()
        assert _equal(_state(kept_model, kept_opt), _state(undo_model, undo_opt))


def test_undoing_the_first_step_leaves_no_optimiser_state(tiny_policy):
    model, optimizer = _fresh(tiny_policy)
    before = _state(model, optimizer)
    snapshot = StepUndo(optimizer)
    snapshot.take()
    _step(model, optimizer, 1.0)
    assert len(optimizer.state) > 0
    snapshot.restore()
    assert _equal(before, _state(model, optimizer)) and len(optimizer.state) == 0


def test_undoing_a_step_restores_the_groups_hyperparameters(tiny_policy):
    model, optimizer = _fresh(tiny_policy)
    _step(model, optimizer, 1.0)
    snapshot = StepUndo(optimizer)
    snapshot.take()
    optimizer.param_groups[0]["lr"] = 5e-2   # as a schedule would, between the take and the step
    _step(model, optimizer, 2.0)
    snapshot.restore()
    assert optimizer.param_groups[0]["lr"] == 1e-2
    assert all(p in optimizer.state for p in model.parameters())   # the state object still keyed by the weights


def test_optimizer_states_round_trip_through_safetensors(tiny_policy, tmp_path):
    """A checkpoint's optimizer file (no pickle): a resumed optimizer takes the same next step bit for bit."""
    from genenv.checkpoint import load_optimizers, save_optimizers
    model, optimizer = _fresh(tiny_policy)
    for scale in (1.0, 2.0):
        _step(model, optimizer, scale)
    rng = torch.get_rng_state()
    save_optimizers(tmp_path / "opt.safetensors", {"agent": optimizer}, rng)
    loaded = load_optimizers(tmp_path / "opt.safetensors")
    assert loaded["torch_rng"].equal(rng)
    resumed_model, resumed = _fresh(tiny_policy)
    with torch.no_grad():
        for p, q in zip(resumed_model.parameters(), model.parameters()):
            p.copy_(q)
    resumed.load_state_dict(loaded["agent"])
    assert _equal(_state(model, optimizer), _state(resumed_model, resumed))
    _step(model, optimizer, 3.0)
    _step(resumed_model, resumed, 3.0)
    assert _equal(_state(model, optimizer), _state(resumed_model, resumed))


def test_the_cap_estimates_kl_from_the_start_to_now_on_the_starts_samples():
    """The watched sequences were sampled by the simulator at the start of the update, so the cap's estimate is
    KL(start || now) = sum_x p(x) log(p(x) / q(x)), not k3 taken the other way round (whose mean over these
    samples is E_p[p/q - 1 - log(p/q)] = 0.968 here, not any KL). One-token sequences drawn exactly in
    proportion to p = (0.7, 0.2, 0.1), q = (0.2, 0.3, 0.5): the estimate is the exact expectation."""
    from types import SimpleNamespace

    from genenv.algos.kl_cap import update_kl

    p, q = [0.7, 0.2, 0.1], [0.2, 0.3, 0.5]
    tokens = [0] * 70 + [1] * 20 + [2] * 10
    batch = SimpleNamespace(response_mask=torch.ones(len(tokens), 1))
    start = torch.log(torch.tensor([[p[t]] for t in tokens], dtype=torch.float64))
    now = torch.log(torch.tensor([[q[t]] for t in tokens], dtype=torch.float64))
    policy_now = SimpleNamespace(set_training=lambda training: None, token_logprobs=lambda b, **_: (now, None))
    exact = sum(pi * math.log(pi / qi) for pi, qi in zip(p, q))            # 0.6349
    assert update_kl(policy_now, [batch], [start]) == pytest.approx(exact, rel=1e-9)
    assert exact == pytest.approx(0.6349, abs=1e-4)
    other_way = sum(pi * (pi / qi - 1 - math.log(pi / qi)) for pi, qi in zip(p, q))
    assert other_way == pytest.approx(0.9685, abs=1e-4)                      # what the old estimator gave


def test_kl_to_the_initial_simulator_is_weighted_by_now_over_the_sampler():
    """env_kl_to_initial: the watched sequences were sampled by the simulator at the start of the update, not by the
    initial one nor by the simulator now, so KL(now || initial) is k3 weighted by now / start per sequence. One-token
    sequences drawn exactly in proportion to start = (0.7, 0.2, 0.1); now = (0.5, 0.3, 0.2), initial = (0.1, 0.1,
    0.8): the estimate is the exact KL(now || initial) = 0.8570. The old estimator (k3 with the initial simulator as
    the sampling side) gives 1.9173 here, and grows with exp(log now - log initial) on a sequence the initial
    simulator finds unlikely."""
    from types import SimpleNamespace

    from genenv.algos.kl_cap import KLCap

    start_p, now_p, initial_p = [0.7, 0.2, 0.1], [0.5, 0.3, 0.2], [0.1, 0.1, 0.8]
    tokens = [0] * 70 + [1] * 20 + [2] * 10
    batch = SimpleNamespace(response_mask=torch.ones(len(tokens), 1))

    def policy_of(probs):
        logp = torch.log(torch.tensor([[probs[t]] for t in tokens], dtype=torch.float64))
        return SimpleNamespace(set_training=lambda training: None, token_logprobs=lambda b, **_: (logp, None))

    start = policy_of(start_p)
    cap = KLCap(start, torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1), [batch], max_kl=0.0,
                watch_start=True)
    assert cap.kl_to(policy_of(start_p)) == 0.0                  # before any step, to itself
    cap.policy = policy_of(now_p)                                 # the update moved it
    exact = sum(a * math.log(a / b) for a, b in zip(now_p, initial_p))
    assert exact == pytest.approx(0.8570, abs=1e-4)
    assert cap.kl_to(policy_of(initial_p)) == pytest.approx(exact, rel=1e-9)
    old = sum(s * (a / b - 1 - math.log(a / b)) for s, a, b in zip(start_p, now_p, initial_p))
    assert old == pytest.approx(1.9173, abs=1e-4)
    without_a_cap = KLCap(start, None, [batch], max_kl=0.0)
    assert without_a_cap.start_logps == [] and without_a_cap.keep_step()
