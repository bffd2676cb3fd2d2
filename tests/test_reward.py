import math

import numpy as np
import pytest

from genenv.experimental.options import interior_reward
from genenv.reward import (
    alpha_reward,
    frontier_reward,
    in_band,
    rescaled,
    rwr_weights,
    success_rate,
)


def test_success_rate_counts_threshold():
    assert success_rate([1, 0, 1, 1]) == 0.75
    assert success_rate([0.9, 0.5, 1.0], success_threshold=0.8) == pytest.approx(2 / 3)
    assert success_rate([0, 0, 0, 0]) == 0.0


def test_success_rate_rejects_empty():
    with pytest.raises(ValueError):
        success_rate([])


def test_alpha_reward_hand_values():
    assert alpha_reward(0.5) == 1.0
    # exp(-2 * 0.25) = exp(-0.5)
    assert alpha_reward(0.0) == pytest.approx(math.exp(-0.5))
    assert alpha_reward(1.0) == pytest.approx(0.6065306597)
    assert alpha_reward(0.7, alpha=0.5, beta=10.0) == pytest.approx(math.exp(-0.4))
    vec = alpha_reward(np.array([0.25, 0.5, 0.75]), beta=4.0)
    np.testing.assert_allclose(vec, [math.exp(-0.25), 1.0, math.exp(-0.25)])


def test_in_band_edges():
    assert in_band(0.4) and in_band(0.6) and in_band(0.5)
    assert not in_band(0.39) and not in_band(0.61)
    np.testing.assert_array_equal(in_band(np.array([0.0, 0.45, 0.9])), [False, True, False])


def test_rwr_weights_hand_values():
    weights = rwr_weights([0.0, 1.0], lam=1.0)
    # exp(0) : exp(1) normalised
    np.testing.assert_allclose(weights, [1 / (1 + math.e), math.e / (1 + math.e)])
    # large lambda does not overflow
    big = rwr_weights([0.0, 1.0], lam=1000.0)
    assert np.all(np.isfinite(big)) and big[1] == pytest.approx(1.0)


def test_frontier_reward_rescales_r_env_to_zero_one():
    floor = np.exp(-2.0 * 0.25)                                 # 0.6065: R_env at p_hat 0 and 1
    assert frontier_reward(1.0) == pytest.approx(1.0)
    assert frontier_reward(floor) == pytest.approx(0.0)
    assert frontier_reward(np.exp(-2.0 * 0.0625)) == pytest.approx((0.8825 - 0.6065) / (1 - 0.6065), abs=1e-3)
    assert frontier_reward(0.0) == 0.0                          # below the floor: clipped
    # alpha 0.3: the floor is at p_hat 1 (distance 0.7), so p_hat 0 keeps some reward
    assert frontier_reward(np.exp(-2.0 * 0.09), alpha=0.3) > 0.0
    assert frontier_reward(np.exp(-2.0 * 0.49), alpha=0.3) == pytest.approx(0.0)
    assert list(frontier_reward(np.array([0.7, 0.9]), beta=0.0)) == [0.0, 0.0]   # flat R_env: no contrast


def test_interior_reward_is_r_env_inside_and_zero_at_never_or_always_solved():
    assert interior_reward(0.0, alpha=0.25, beta=8.0) == 0.0 and interior_reward(1.0, alpha=0.25, beta=8.0) == 0.0
    assert interior_reward(0.25, alpha=0.25, beta=8.0) == pytest.approx(1.0)
    assert interior_reward(0.125, alpha=0.25, beta=8.0) == pytest.approx(np.exp(-8 * 0.015625))   # 0.8825
    assert interior_reward(0.875, alpha=0.25, beta=8.0) == pytest.approx(np.exp(-8 * 0.390625))   # 0.0439
    # alpha 0.5: the same ordering as frontier_reward, both ends 0
    p_hat = np.array([0.0, 0.125, 0.25, 0.5, 0.75, 1.0])
    interior, rescaled = interior_reward(p_hat), frontier_reward(alpha_reward(p_hat))
    assert list(np.argsort(interior, kind="stable")) == list(np.argsort(rescaled, kind="stable"))
    assert interior[0] == interior[-1] == 0.0 and rescaled[0] == pytest.approx(0.0)


def test_the_scalar_shortcuts_give_the_array_arithmetics_values():
    """One p_hat (a float) or one group's rewards (a list) skip numpy's array set-up; the values are those of the
    array path (the same operations; to the last bits here, within an ulp asserted, as C's pow may differ)."""
    rng = np.random.default_rng(0)
    p_hats = [float(p) for p in rng.random(5000)] + [k / 8 for k in range(9)] + [(k + 1) / 10 for k in range(9)]
    for p in p_hats:
        for alpha, beta in ((0.5, 2.0), (0.3, 5.0), (0.7, 0.5)):
            array_value = float(np.exp(-beta * (np.asarray(p) - alpha) ** 2))
            assert alpha_reward(p, alpha, beta) == pytest.approx(array_value, rel=1e-15, abs=0)
            assert isinstance(alpha_reward(p, alpha, beta), float)
            assert in_band(p, alpha, 0.1) == bool(np.abs(np.asarray(p) - alpha) <= 0.1 + 1e-12)
    for _ in range(2000):
        rewards = [float(r) for r in rng.choice([0.0, 0.5, 1.0], size=int(rng.integers(1, 9)))]
        assert success_rate(rewards, 1.0) == success_rate(np.array(rewards), 1.0)
        assert success_rate(tuple(rewards), 0.5) == success_rate(np.array(rewards), 0.5)
    assert success_rate([[1.0, 0.0], [1.0, 1.0]]) == 0.75   # nested lists still go through numpy's ravel
    with pytest.raises(ValueError):
        success_rate([])


def _scored_candidates(p_hat_level: str):
    from genenv.config import load_config
    from genenv.domains import Invalid, Task
    from genenv.generation import Candidate
    from genenv.reward import scored
    from genenv.rollout import Episode

    task = Task("1+1", "1+1", "2", 1)

    def episodes(*rewards):
        return tuple(Episode(task, reward=float(r)) for r in rewards)

    seed = Task("s", "s")
    candidates = [Candidate(0, seed, "", [], [], "a", task, episodes(1, 1, 1, 0)),     # 3 of 4
                  Candidate(0, seed, "", [], [], "b", task, episodes(0, 0, 0, 1)),     # 1 of 4
                  Candidate(0, seed, "", [], [], "c", Invalid("bad")),                 # invalid: untouched
                  Candidate(1, seed, "", [], [], "d", task, episodes(1, 1, 1, 1)),     # always solved
                  Candidate(1, seed, "", [], [], "e", task)]                           # valid, never rolled out
    # batch p_hat is the paper's (RWR) setting: the pg update refuses it (every variation would earn alike)
    cfg = load_config("smoke", [f"curriculum_reward.p_hat_level={p_hat_level}", "curriculum_reward.k_min=0.1",
                                f"env.update={'rwr' if p_hat_level == 'batch' else 'pg'}"])
    from genenv.coevolve import scoring
    return scored(candidates, **scoring(cfg))


def test_scored_puts_p_hat_r_env_and_the_band_on_each_task():
    """Task-level p_hat: 0.75, 0.25 and 1.0, R_env exp(-2 (p - 0.5)^2) = 0.8825, 0.8825, 0.6065; no task within
    k_min = 0.1 of alpha. The invalid and the never-rolled-out generation keep R_env 0 and no p_hat."""
    out = _scored_candidates("task")
    assert [c.p_hat_task for c in out] == [0.75, 0.25, None, 1.0, None]
    assert [c.p_hat for c in out] == [0.75, 0.25, None, 1.0, None]
    assert [c.r_env for c in out] == pytest.approx([0.88250, 0.88250, 0.0, 0.60653, 0.0], abs=1e-5)
    assert [c.in_band for c in out] == [False] * 5


def test_scored_with_batch_p_hat_gives_a_seed_batch_one_p_hat():
    """Batch-level p_hat: seed 0's two rolled-out tasks pool their 8 rollouts (4 of 8 = 0.5: R_env 1, in band);
    seed 1's only rolled-out task keeps its own 1.0. Each task's own p_hat stays in p_hat_task."""
    out = _scored_candidates("batch")
    assert [c.p_hat for c in out] == [0.5, 0.5, None, 1.0, None]
    assert [c.p_hat_task for c in out] == [0.75, 0.25, None, 1.0, None]
    assert [c.r_env for c in out] == pytest.approx([1.0, 1.0, 0.0, 0.60653, 0.0], abs=1e-5)
    assert [c.in_band for c in out] == [True, True, False, False, False]


def test_challenger_rewards_rescale_r_env_and_pay_a_shut_task_what_a_useless_one_earns():
    """Valid tasks earn (R_env - floor) / (1 - floor), floor = exp(-0.5) = 0.6065 at beta 2; an invalid one
    0 (experimental.signal=penalised: its invalid_reward); a valid task the gate shuts out 0."""
    from genenv.domains import Invalid, Task
    from genenv.experimental.options import penalised_rewards
    from genenv.generation import Candidate
    from genenv.reward import challenger_rewards

    def candidate(level, r_env, valid=True):
        return Candidate(0, Task("s", "s"), "", [], [], "x", Task("t", "t", "a", level) if valid else Invalid("no"),
                         r_env=r_env)

    floor = float(np.exp(-0.5))
    members = [candidate(2, 1.0), candidate(3, 1.0), candidate(3, 0.8825), candidate(3, 0.0, valid=False)]
    assert challenger_rewards(members, rescaled(0.5, 2.0)) == \
        pytest.approx([1.0, 1.0, (0.8825 - floor) / (1 - floor), 0.0])
    assert challenger_rewards(members, rescaled(0.5, 2.0), gate=lambda c: c.parsed.level == 3) == \
        pytest.approx([0.0, 1.0, (0.8825 - floor) / (1 - floor), 0.0])
    assert penalised_rewards(members, rescaled(0.5, 2.0), invalid_reward=-0.5, gate=lambda c: c.parsed.level == 3) == \
        pytest.approx([0.0, 1.0, (0.8825 - floor) / (1 - floor), -0.5])
