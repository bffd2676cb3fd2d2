"""Paired comparisons over seeds: differences, their bootstrap intervals and the probability of improvement.

Three views of "the reference beats this arm", all over seeds:

- the mean paired difference with a percentile bootstrap interval (a few lines of numpy, :func:`bootstrap_ci`;
  the interval every table in the docs reports);
- the same difference with a bias-corrected and accelerated (BCa) interval, ``scipy.stats.bootstrap``'s, which
  corrects the percentile interval's bias and skew at the handful of seeds a comparison has;
- the probability of improvement of rliable (Agarwal et al., 2021): P(X > Y) + P(X = Y) / 2 for a seed's run of
  the reference X against one of the other arm Y, over all pairs of seeds (the Mann-Whitney U statistic over
  n_x n_y), 0.5 when both arms score alike.
"""

from __future__ import annotations

import numpy as np
from scipy import stats as scipy_stats


def bootstrap_ci(values, confidence: float = 0.95, resamples: int = 10_000, seed: int = 0) -> list[float] | None:
    """Percentile bootstrap interval of the mean of ``values`` (None when fewer than two values)."""
    values = np.asarray([v for v in values if v is not None], dtype=float)
    if values.size < 2:
        return None
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, values.size, size=(resamples, values.size))].mean(axis=1)
    return percentile_interval(means, confidence)


def percentile_interval(estimates: np.ndarray, confidence: float) -> list[float]:
    """The central ``confidence`` interval of bootstrap estimates: their (1-c)/2 and (1+c)/2 percentiles."""
    tail = 100.0 * (1.0 - confidence) / 2.0
    return [float(v) for v in np.percentile(estimates, [tail, 100.0 - tail])]


def bca_interval(values, confidence: float = 0.95, resamples: int = 10_000, seed: int = 0) -> list[float] | None:
    """scipy's bias-corrected and accelerated bootstrap interval of the mean of ``values``; None with fewer than
    two values or when all are equal (BCa's acceleration is then undefined)."""
    values = np.asarray([v for v in values if v is not None], dtype=float)
    if values.size < 2 or np.all(values == values[0]):
        return None
    result = scipy_stats.bootstrap((values,), np.mean, confidence_level=confidence, n_resamples=resamples,
                                   method="BCa", rng=np.random.default_rng(seed))
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    return None if not (np.isfinite(low) and np.isfinite(high)) else [low, high]


def probability_of_improvement(x, y) -> float | None:
    """rliable's probability of improvement of X over Y (one task): the Mann-Whitney U statistic of X against Y
    over n_x n_y, that is P(X > Y) + P(X = Y) / 2 over every pair of runs; 0.5 when both hold the same scores."""
    x = np.asarray([v for v in x if v is not None], dtype=float)
    y = np.asarray([v for v in y if v is not None], dtype=float)
    if not x.size or not y.size:
        return None
    if np.array_equal(x, y):
        return 0.5
    return float(scipy_stats.mannwhitneyu(x, y, alternative="greater").statistic / (x.size * y.size))


def paired_differences(reference: dict[int, float | None], other: dict[int, float | None]) -> dict:
    """Per seed present in both: reference minus other; their mean, 95% percentile and BCa bootstrap intervals,
    how many seeds the reference wins (a positive difference), and the probability that a run of the reference
    beats a run of the other (rliable's, over those seeds)."""
    seeds = sorted(s for s in reference if s in other and reference[s] is not None and other[s] is not None)
    differences = [reference[s] - other[s] for s in seeds]
    interval = bootstrap_ci(differences)
    return {"per_seed": [{"seed": s, "difference": d} for s, d in zip(seeds, differences)],
            "mean": float(np.mean(differences)) if differences else None, "ci95": interval,
            "excludes_zero": bool(interval is not None and (interval[0] > 0 or interval[1] < 0)),
            "ci95_bca": bca_interval(differences),
            "probability_of_improvement": probability_of_improvement([reference[s] for s in seeds],
                                                                     [other[s] for s in seeds]),
            "wins": sum(d > 0 for d in differences), "of": len(differences)}


def rank_correlation(x, y) -> float | None:
    """Spearman's rank correlation (``scipy.stats.spearmanr``: the Pearson correlation of average ranks); None when
    either is constant."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return float(scipy_stats.spearmanr(x, y).statistic)


def gain_recovered(reference: dict[int, float | None], baseline: dict[int, float | None],
                   ceiling: dict[int, float | None], confidence: float = 0.95, resamples: int = 10_000,
                   seed: int = 0) -> dict:
    """How much of the ceiling's gain over the baseline the reference recovers, paired by seed:
    mean(reference - baseline) / mean(ceiling - baseline) over the seeds all three have, with a percentile
    bootstrap interval over resampled seeds (resamples where the ceiling gains nothing are left out). The ratio
    is None when the ceiling's mean gain is not positive: there is no gain to recover. ``ceiling_gain_ci95``, the
    interval of the ceiling's own gain, says whether the ratio means anything: when it includes 0 the
    denominator may be noise, and the ratio's interval is wide for that reason."""
    seeds = sorted(s for s in reference if all(d.get(s) is not None for d in (reference, baseline, ceiling)))
    gains = np.array([reference[s] - baseline[s] for s in seeds], dtype=float)
    ceiling_gains = np.array([ceiling[s] - baseline[s] for s in seeds], dtype=float)
    out = {"seeds": seeds, "reference_gain": float(gains.mean()) if seeds else None,
           "ceiling_gain": float(ceiling_gains.mean()) if seeds else None, "ceiling_gain_ci95": None,
           "ratio": None, "ci95": None}
    if len(seeds) >= 2:
        rng = np.random.default_rng(seed)
        picks = rng.integers(0, len(seeds), size=(resamples, len(seeds)))
        numerators, denominators = gains[picks].mean(axis=1), ceiling_gains[picks].mean(axis=1)
        out["ceiling_gain_ci95"] = percentile_interval(denominators, confidence)
    if not seeds or ceiling_gains.mean() <= 0:
        return out
    out["ratio"] = float(gains.mean() / ceiling_gains.mean())
    if len(seeds) >= 2:
        ratios = numerators[denominators > 0] / denominators[denominators > 0]
        if ratios.size:
            out["ci95"] = percentile_interval(ratios, confidence)
    return out
