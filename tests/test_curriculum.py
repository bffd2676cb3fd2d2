import math

import numpy as np
import pytest

from genenv.curriculum import (
    alpha_reward,
    frontier_reward,
    in_band,
    interior_reward,
    learning_signal,
    rwr_weights,
    success_rate,
)


def test_success_rate_counts_threshold():
    assert success_rate([1, 0, 1, 1]) == 0.75
    assert success_rate([0.9, 0.5, 1.0], success_threshold=0.8) == pytest.approx(2 / 3)
    assert success_rate([0, 0, 0, 0]) == 0.0


def test_success_rate_posterior_is_beta_mean():
    # k = 3 of n = 4 -> (3 + 1) / (4 + 2)
    assert success_rate([1, 1, 1, 0], posterior=True) == pytest.approx(4 / 6)
    assert success_rate([0, 0], posterior=True) == pytest.approx(1 / 4)


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
    raw = rwr_weights([0.0, 1.0], lam=2.0, normalize=False)
    np.testing.assert_allclose(raw, [1.0, math.exp(2.0)])
    # large lambda does not overflow
    big = rwr_weights([0.0, 1.0], lam=1000.0)
    assert np.all(np.isfinite(big)) and big[1] == pytest.approx(1.0)


def test_learning_signal_peaks_at_half():
    assert learning_signal(0.5) == 0.25
    assert learning_signal(0.1) == pytest.approx(0.09)


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
        for posterior in (False, True):
            assert success_rate(rewards, 1.0, posterior) == success_rate(np.array(rewards), 1.0, posterior)
            assert success_rate(tuple(rewards), 0.5, posterior) == success_rate(np.array(rewards), 0.5, posterior)
    assert success_rate([[1.0, 0.0], [1.0, 1.0]]) == 0.75   # nested lists still go through numpy's ravel
    with pytest.raises(ValueError):
        success_rate([])
