"""Tolerances on measured values derived from the sample size, for timing tests.

A test that measures latency on a shared machine judges what its ``n`` samples can show,
not a best-of-N run: :func:`median_interval` is the distribution-free confidence interval
of a median (order statistics bounding a Binomial(n, ½) count), so a burst of someone
else's load widens what the data allow instead of failing the test or being retried.
"""

from __future__ import annotations

from collections.abc import Sequence

from scipy import stats

#: Two-sided error rate of every bound here: one spurious failure in a million runs.
ALPHA = 1e-6


def median_interval(values: Sequence[float], alpha: float = ALPHA) -> tuple[float, float]:
    """The order statistics x_(k) and x_(n−k+1) that hold the population median with
    probability at least 1 − ``alpha``."""
    ordered = sorted(values)
    n = len(ordered)
    k = int(stats.binom.ppf(alpha / 2, n, 0.5))  # 1-based rank of the lower bound
    if k < 1:
        raise ValueError(f"{n} samples cannot bound a median at the {1 - alpha:.6g} level")
    return ordered[k - 1], ordered[n - k]


def median_within(values: Sequence[float], truth: float, tolerance: float) -> bool:
    """Whether the median's interval reaches ``truth ± tolerance`` (the data do not show
    the median is off by more than ``tolerance``)."""
    low, high = median_interval(values)
    return low <= truth + tolerance and high >= truth - tolerance
