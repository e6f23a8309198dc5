"""The statistics of an A/B comparison, as pure functions of numbers (no I/O, no clock).

Proportions
    :func:`wilson` — Wilson score interval of one proportion (agreement; scipy's).
    :func:`newcombe_difference` — Newcombe's hybrid score interval of ``p1 − p2`` (method 10
    of Newcombe 1998; error rates). It treats the two samples as independent, which is
    conservative for paired samples whose errors are positively correlated.
    :func:`binomial_margin_tests` — exact one-sided binomial tests of a proportion against a
    threshold. :func:`farrington_manning` — one-sided score tests of ``p1 − p2`` against a
    margin (Farrington & Manning 1990).

Latency
    :func:`ratio_of_medians` — canary median / stable median with a percentile bootstrap
    interval (``scipy.stats.bootstrap``; pairs resampled together when paired).
    :func:`hodges_lehmann_paired` / :func:`hodges_lehmann_shift` — the Hodges–Lehmann shift
    with the interval obtained by inverting the Wilcoxon signed-rank / Mann–Whitney test
    (normal approximation of the rank statistic).
    :func:`wilcoxon_p` / :func:`mannwhitney_p` — p-values from scipy, with the degenerate
    cases (no data, every difference zero) answered instead of warned about.
    :func:`prob_superiority` — P(canary > stable) + ½ P(equal), the Mann–Whitney effect size.

Every interval is two-sided at ``confidence``; an :class:`Estimate` with ``None`` bounds
means the data cannot give one. scipy is imported by the functions that use it: importing it
costs ~0.5 s of CPU, which validating a campaign with an A/B section (its footprint check
imports this package) should not pay.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
Values = Sequence[float] | npt.NDArray[np.floating[Any]]
Alternative = Literal["two-sided", "greater", "less"]

#: Above this many pairs the O(n²) Walsh averages are taken on an even subsample.
HL_MAX_N = 3000


@dataclass(frozen=True)
class Estimate:
    """A point estimate and its two-sided interval."""

    value: float | None
    lo: float | None = None
    hi: float | None = None

    @property
    def interval(self) -> list[float | None]:
        return [self.lo, self.hi]


def z_of(confidence: float) -> float:
    """The two-sided standard normal quantile of ``confidence`` (0.95 → 1.95996…)."""
    return NormalDist().inv_cdf(0.5 + confidence / 2)


# -- proportions ---------------------------------------------------------------------------


def wilson(successes: int, n: int, confidence: float = 0.95) -> Estimate:
    """The proportion ``successes / n`` with its Wilson score interval (scipy's)."""
    from scipy import stats as sps

    if n <= 0:
        return Estimate(None)
    if not 0 <= successes <= n:
        raise ValueError(f"successes {successes} outside 0..{n}")
    ci = sps.binomtest(successes, n).proportion_ci(confidence_level=confidence, method="wilson")
    return Estimate(successes / n, float(ci.low), float(ci.high))


def _bounds(estimate: Estimate) -> tuple[float, float, float]:
    if estimate.value is None or estimate.lo is None or estimate.hi is None:
        raise ValueError("an interval is needed here")
    return estimate.value, estimate.lo, estimate.hi


def newcombe_difference(x1: int, n1: int, x2: int, n2: int, confidence: float = 0.95) -> Estimate:
    """``x1/n1 − x2/n2`` with Newcombe's hybrid score interval (from the two Wilson ones)."""
    if n1 <= 0 or n2 <= 0:
        return Estimate(None)
    p1, lo1, hi1 = _bounds(wilson(x1, n1, confidence))
    p2, lo2, hi2 = _bounds(wilson(x2, n2, confidence))
    d = p1 - p2
    lo = d - math.sqrt((p1 - lo1) ** 2 + (hi2 - p2) ** 2)
    hi = d + math.sqrt((hi1 - p1) ** 2 + (p2 - lo2) ** 2)
    return Estimate(d, max(-1.0, lo), min(1.0, hi))


def binomial_margin_tests(successes: int, n: int, threshold: float) -> tuple[float, float]:
    """Exact one-sided binomial p-values of ``successes / n`` against ``threshold``:
    ``(p_above, p_below)`` — small ``p_above`` shows the proportion is above the threshold,
    small ``p_below`` that it is below."""
    from scipy import stats as sps

    if n <= 0:
        return 1.0, 1.0
    if threshold <= 0:
        return (0.0 if successes > 0 else 1.0), 1.0
    if threshold >= 1:
        return 1.0, (0.0 if successes < n else 1.0)
    above = sps.binomtest(successes, n, threshold, alternative="greater").pvalue
    below = sps.binomtest(successes, n, threshold, alternative="less").pvalue
    return float(above), float(below)


def restricted_mle(x1: int, n1: int, x2: int, n2: int, delta: float) -> tuple[float, float]:
    """The maximum-likelihood ``(p1, p2)`` under ``p1 − p2 = delta`` (Farrington & Manning
    1990, closed form of the cubic)."""
    p1, p2, theta = x1 / n1, x2 / n2, n2 / n1
    a = 1 + theta
    b = -(1 + theta + p1 + theta * p2 + delta * (theta + 2))
    c = delta * delta + delta * (2 * p1 + theta + 1) + p1 + theta * p2
    d = -p1 * delta * (1 + delta)
    v = b**3 / (3 * a) ** 3 - b * c / (6 * a * a) + d / (2 * a)
    u_sq = b * b / (3 * a) ** 2 - c / (3 * a)
    u = math.copysign(math.sqrt(max(u_sq, 0.0)), v)
    if u == 0:
        r1 = -b / (3 * a)
    else:
        w = (math.pi + math.acos(max(-1.0, min(1.0, v / u**3)))) / 3
        r1 = 2 * u * math.cos(w) - b / (3 * a)
    r1 = min(1.0, max(0.0, r1))
    r2 = min(1.0, max(0.0, r1 - delta))
    return r1, r2


def farrington_manning(x1: int, n1: int, x2: int, n2: int, margin: float) -> tuple[float, float]:
    """One-sided score tests of ``p1 − p2`` against ``margin``: ``(p_below, p_above)`` —
    small ``p_below`` shows ``p1 − p2 < margin``, small ``p_above`` that it is above."""
    if n1 <= 0 or n2 <= 0:
        return 1.0, 1.0
    r1, r2 = restricted_mle(x1, n1, x2, n2, margin)
    se = math.sqrt(r1 * (1 - r1) / n1 + r2 * (1 - r2) / n2)
    diff = x1 / n1 - x2 / n2 - margin
    if se == 0:  # both restricted rates at 0 or 1: the data sit exactly on a boundary
        if diff == 0:
            return 1.0, 1.0
        return (0.0, 1.0) if diff < 0 else (1.0, 0.0)
    z = diff / se
    return NormalDist().cdf(z), NormalDist().cdf(-z)


# -- latency -------------------------------------------------------------------------------


def _clean(values: Values) -> FloatArray:
    return np.asarray(values, dtype=np.float64)


def ratio_of_medians(
    stable: Values,
    canary: Values,
    *,
    paired: bool,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> Estimate:
    """``median(canary) / median(stable)`` with a percentile bootstrap interval (scipy's).

    ``paired``: ``stable[i]`` and ``canary[i]`` belong to one prompt and are resampled
    together (the interval then profits from their correlation); otherwise each side is
    resampled on its own. ``None`` when a side is empty or its median is not positive; no
    interval when most resamples have a stable median of 0. ``seed`` makes it repeatable.
    """
    from scipy import stats as sps

    s, c = _clean(stable), _clean(canary)
    if s.size == 0 or c.size == 0 or (paired and s.size != c.size):
        return Estimate(None)
    s_med, c_med = float(np.median(s)), float(np.median(c))
    if s_med <= 0:
        return Estimate(None)
    with warnings.catch_warnings():
        # A resample whose stable median is 0 has no ratio (NaN), which scipy warns about;
        # such resamples are counted and left out below instead.
        warnings.simplefilter("ignore", sps.DegenerateDataWarning)
        result = sps.bootstrap(
            (s, c),
            _median_ratio,
            paired=paired,
            vectorized=True,
            n_resamples=resamples,
            confidence_level=confidence,
            method="percentile",
            rng=np.random.default_rng(seed),
        )
    ratios = result.bootstrap_distribution
    finite = ratios[np.isfinite(ratios)]
    if finite.size < resamples // 2:
        return Estimate(c_med / s_med)
    if finite.size == ratios.size:
        lo, hi = result.confidence_interval
    else:
        tail = (1 - confidence) / 2 * 100
        lo, hi = np.percentile(finite, [tail, 100 - tail])
    return Estimate(c_med / s_med, float(lo), float(hi))


def _median_ratio(stable: FloatArray, canary: FloatArray, axis: int = -1) -> FloatArray:
    """median(canary) / median(stable) along ``axis``; NaN where the stable median is ≤ 0."""
    s_med, c_med = np.median(stable, axis=axis), np.median(canary, axis=axis)
    out = np.full(np.shape(s_med), np.nan)
    return np.asarray(np.divide(c_med, s_med, out=out, where=s_med > 0), dtype=np.float64)


def _order_stat_bounds(sorted_values: FloatArray, mean: float, sd: float, z: float) -> Estimate:
    """Invert a rank test whose statistic at shift ``mu`` counts the ``sorted_values`` above
    ``mu`` (signed-rank: Walsh averages; Mann–Whitney: pairwise differences) and is
    approximately normal with ``mean`` and ``sd``: the shifts it accepts at level ``z`` are
    ``[v_(C), v_(M+1−C)]`` (1-indexed order statistics), ``C = ceil(mean − z·sd)``."""
    m = sorted_values.size
    c = math.ceil(mean - z * sd)
    value = float(np.median(sorted_values))
    if c < 1:
        return Estimate(value)  # too few observations for an interval at this level
    return Estimate(value, float(sorted_values[c - 1]), float(sorted_values[m - c]))


def _subsample(values: FloatArray, limit: int) -> FloatArray:
    if values.size <= limit:
        return values
    picks = np.linspace(0, values.size - 1, limit).round().astype(int)
    return np.asarray(np.sort(values)[picks], dtype=np.float64)


def hodges_lehmann_paired(differences: Values, confidence: float = 0.95) -> Estimate:
    """The median of the Walsh averages of ``differences`` (the shift estimate that goes
    with the signed-rank test) and the interval that inverts that test."""
    d = _subsample(_clean(differences), HL_MAX_N)
    n = d.size
    if n == 0:
        return Estimate(None)
    i, j = np.triu_indices(n)
    walsh = np.sort((d[i] + d[j]) / 2)
    mean = n * (n + 1) / 4
    sd = math.sqrt(n * (n + 1) * (2 * n + 1) / 24)
    return _order_stat_bounds(walsh, mean, sd, z_of(confidence))


def hodges_lehmann_shift(x: Values, y: Values, confidence: float = 0.95) -> Estimate:
    """The median of all differences ``x_i − y_j`` (the shift estimate that goes with the
    Mann–Whitney test) and the interval that inverts that test."""
    a, b = _subsample(_clean(x), HL_MAX_N), _subsample(_clean(y), HL_MAX_N)
    if a.size == 0 or b.size == 0:
        return Estimate(None)
    diffs = np.sort(np.subtract.outer(a, b).ravel())
    n1, n2 = a.size, b.size
    mean = n1 * n2 / 2
    sd = math.sqrt(n1 * n2 * (n1 + n2 + 1) / 12)
    return _order_stat_bounds(diffs, mean, sd, z_of(confidence))


def wilcoxon_p(differences: Values, alternative: Alternative = "two-sided") -> float | None:
    """The signed-rank test's p-value for ``differences`` centred on 0 (zeros dropped);
    ``None`` without data, 1.0 when every difference is zero."""
    from scipy import stats as sps

    d = _clean(differences)
    if d.size == 0:
        return None
    if not np.any(d != 0):
        return 1.0
    # "auto" takes the exact distribution for small samples without ties or zeros and the
    # normal approximation otherwise; zeros are dropped by the classic Wilcoxon rule.
    result = sps.wilcoxon(d, zero_method="wilcox", alternative=alternative, method="auto")
    return float(result.pvalue)


def mannwhitney_p(
    x: Values,
    y: Values,
    alternative: Alternative = "two-sided",
) -> float | None:
    """The Mann–Whitney U test's p-value of ``x`` against ``y``; ``None`` without data."""
    from scipy import stats as sps

    a, b = _clean(x), _clean(y)
    if a.size == 0 or b.size == 0:
        return None
    if np.unique(np.concatenate([a, b])).size == 1:
        return 1.0  # every value equal: no evidence of any difference
    return float(sps.mannwhitneyu(a, b, alternative=alternative, method="auto").pvalue)


def prob_superiority(x: Values, y: Values) -> float | None:
    """P(X > Y) + ½ P(X = Y) for one draw from each (``U / (n1·n2)``); 0.5 = no difference."""
    from scipy import stats as sps

    a, b = _clean(x), _clean(y)
    if a.size == 0 or b.size == 0:
        return None
    ranks = sps.rankdata(np.concatenate([a, b]))
    u = ranks[: a.size].sum() - a.size * (a.size + 1) / 2
    return float(u / (a.size * b.size))


def median(values: Values) -> float | None:
    data = _clean(values)
    return float(np.median(data)) if data.size else None
