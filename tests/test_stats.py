"""Paired differences over seeds and their bootstrap intervals, against hand-computed values."""

import numpy as np
import pytest
from tests.test_report import _record

from genenv.analysis import summarize
from genenv.report import text_table
from genenv.stats import bootstrap_ci, paired_differences


def test_bootstrap_interval_hand_values():
    assert bootstrap_ci([0.3, 0.3, 0.3]) == [pytest.approx(0.3), pytest.approx(0.3)]
    assert bootstrap_ci([0.5]) is None and bootstrap_ci([]) is None and bootstrap_ci([None, 1.0]) is None
    low, high = bootstrap_ci([0.0, 1.0])  # resampled means of two values: 0, 0.5 or 1 (1/4, 1/2, 1/4)
    assert (low, high) == (0.0, 1.0)
    low, high = bootstrap_ci(np.linspace(0.0, 1.0, 200))  # many values: about mean +- 1.96 sd / sqrt(n)
    half = 1.96 * np.linspace(0.0, 1.0, 200).std() / np.sqrt(200)
    assert low == pytest.approx(0.5 - half, abs=0.01) and high == pytest.approx(0.5 + half, abs=0.01)
    assert bootstrap_ci([0.1, 0.2, 0.4], seed=3) == bootstrap_ci([0.1, 0.2, 0.4], seed=3)  # reproducible


def test_paired_differences_pair_by_seed():
    ref = {0: 0.5, 1: 0.4, 2: 0.3, 3: None}
    other = {0: 0.3, 1: 0.4, 2: 0.1, 4: 0.9}
    out = paired_differences(ref, other)
    assert [row["seed"] for row in out["per_seed"]] == [0, 1, 2]
    assert [row["difference"] for row in out["per_seed"]] == pytest.approx([0.2, 0.0, 0.2])
    assert out["mean"] == pytest.approx(0.4 / 3) and out["wins"] == 2 and out["of"] == 3
    assert 0.0 <= out["ci95"][0] <= out["mean"] <= out["ci95"][1] <= 0.2 + 1e-12
    assert not out["excludes_zero"]  # a resample of the tied seed alone has mean 0
    clear = paired_differences({0: 0.5, 1: 0.6, 2: 0.7}, {0: 0.3, 1: 0.3, 2: 0.4})
    assert clear["excludes_zero"] and clear["ci95"][0] > 0


def test_summary_and_table_show_reference_minus_each_curriculum():
    groups = {"genenv": [_record("genenv", s, [0.2, v]) for s, v in enumerate([0.5, 0.6, 0.7])],
              "random": [_record("random", s, [0.2, v]) for s, v in enumerate([0.3, 0.3, 0.4])]}
    summary = summarize(groups)
    diff = summary["curricula"]["random"]["reference_minus_this"]["final"]
    assert diff["mean"] == pytest.approx(0.8 / 3) and diff["wins"] == 3 and diff["excludes_zero"]
    assert summary["curricula"]["genenv"]["reference_minus_this"]["final"]["mean"] == 0.0
    line = next(line for line in text_table(summary).splitlines() if line.startswith("random"))
    low, high = diff["ci95"]
    assert f"+0.267 [{low:+.3f}, {high:+.3f}] 3/3" in line


def test_rank_correlation_hand_values():
    from genenv.stats import rank_correlation
    assert rank_correlation([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert rank_correlation([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert rank_correlation([1, 2, 3, 4], [1, 8, 27, 1000]) == pytest.approx(1.0)  # monotone, not linear
    # ranks (0,1,2,3) against (0.5,0.5,2.5,2.5): Pearson = 0.894
    assert rank_correlation([1, 2, 3, 4], [5, 5, 9, 9]) == pytest.approx(0.8944, abs=1e-4)
    assert rank_correlation([1, 1, 1], [1, 2, 3]) is None


def test_gain_recovered_hand_values():
    from genenv.stats import gain_recovered
    out = gain_recovered({0: 0.35, 1: 0.40, 2: 0.30}, {0: 0.30, 1: 0.30, 2: 0.30}, {0: 0.40, 1: 0.50, 2: 0.30})
    assert out["seeds"] == [0, 1, 2]
    assert out["reference_gain"] == pytest.approx(0.05) and out["ceiling_gain"] == pytest.approx(0.1)
    assert out["ratio"] == pytest.approx(0.5)
    low, high = out["ci95"]
    assert 0.0 <= low <= 0.5 <= high <= 1.0 + 1e-12   # every resample's ratio of means lies in [0, 1] here
    # the ceiling's own gains are 0.1, 0.2, 0.0: every resample's mean lies in [0, 0.2]
    assert 0.0 <= out["ceiling_gain_ci95"][0] <= 0.1 <= out["ceiling_gain_ci95"][1] <= 0.2 + 1e-12
    no_gain = gain_recovered({0: 0.3}, {0: 0.3}, {0: 0.2})   # the ceiling is below the baseline
    assert no_gain["ratio"] is None and no_gain["ceiling_gain"] == pytest.approx(-0.1)


def test_summary_has_oracle_gain_and_late_calibration():
    groups = {label: [_record(label, s, [0.2, v]) for s, v in enumerate(values)]
              for label, values in (("genenv", [0.5, 0.6]), ("random", [0.3, 0.4]), ("oracle", [0.7, 0.8]))}
    summary = summarize(groups)
    assert summary["oracle_gain_recovered"]["ratio"] == pytest.approx(0.5)
    assert "band_hit_rate_from_epoch_20" in summary["curricula"]["genenv"]
    words = " ".join(text_table(summary).split())   # (the line wraps at 100 columns)
    assert "recovers of the oracle's gain over random" in words and \
        "50% [95% CI 50%, 50%] (genenv +0.200, oracle +0.400)" in words
    # an oracle whose gain over random may be noise gets a warning with the interval of that gain
    noisy = {label: [_record(label, s, [0.2, v]) for s, v in enumerate(values)]
             for label, values in (("genenv", [0.5, 0.4]), ("random", [0.3, 0.4]), ("oracle", [0.5, 0.35]))}
    words = " ".join(text_table(summarize(noisy)).split())
    assert "the oracle's own gain is not distinguishable from 0 ([-0.050, +0.200]), so this share says little" \
        in words


def test_bca_interval_is_scipys():
    """Against scipy's own BCa bootstrap of the same values, resamples and generator."""
    import scipy.stats

    from genenv.stats import bca_interval
    values = [0.031, -0.012, 0.055, 0.020, 0.008, 0.047, -0.003, 0.026]
    theirs = scipy.stats.bootstrap((np.asarray(values),), np.mean, confidence_level=0.95, n_resamples=10_000,
                                   method="BCa", rng=np.random.default_rng(0)).confidence_interval
    assert bca_interval(values) == [theirs.low, theirs.high]
    percentile = bootstrap_ci(values)
    assert bca_interval(values) != percentile and bca_interval(values)[0] < np.mean(values) < bca_interval(values)[1]
    assert bca_interval([0.1, 0.1, 0.1]) is None and bca_interval([0.2]) is None


def test_probability_of_improvement_is_rliables():
    """Against rliable's own metric (one task: a column of runs per algorithm) and by hand."""
    from genenv.stats import probability_of_improvement
    x, y = [0.50, 0.42, 0.38, 0.47], [0.41, 0.42, 0.30, 0.45, 0.36]
    # pairs: 0.50 beats 5; 0.42 beats 0.41, 0.30, 0.36 and ties 0.42 (3.5); 0.38 beats 0.30, 0.36 (2); 0.47 all 5
    assert probability_of_improvement(x, y) == pytest.approx((5 + 3.5 + 2 + 5) / 20)
    metrics = pytest.importorskip("rliable.metrics")
    assert probability_of_improvement(x, y) == pytest.approx(
        metrics.probability_of_improvement(np.asarray(x)[:, None], np.asarray(y)[:, None]))
    assert probability_of_improvement(x, x) == 0.5 == metrics.probability_of_improvement(
        np.asarray(x)[:, None], np.asarray(x)[:, None])


def test_paired_differences_carry_bca_and_probability_of_improvement():
    reference = {0: 0.50, 1: 0.42, 2: 0.38, 3: 0.47}
    other = {0: 0.41, 1: 0.42, 2: 0.30, 3: 0.45, 4: 0.36}     # seed 4 has no pair: left out of all three
    paired = paired_differences(reference, other)
    assert paired["of"] == 4 and paired["wins"] == 3
    assert paired["ci95_bca"] is not None and paired["ci95_bca"][0] < paired["mean"] < paired["ci95_bca"][1]
    # pairs over seeds 0-3: 0.50 beats 4; 0.42 beats 2, ties 1 (2.5); 0.38 beats 0.30 (1); 0.47 beats 4
    assert paired["probability_of_improvement"] == pytest.approx((4 + 2.5 + 1 + 4) / 16)
