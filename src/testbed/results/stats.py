"""Bootstrap confidence intervals of percentiles, means and rates — pure, seeded functions.

A :class:`Sample` is a set of observations grouped in *clusters*: the unit that is resampled.
A request is one cluster; its TTFT is one value, its inter-token gaps are several values of
the same cluster (resampling gaps one by one would ignore that gaps of one request move
together, and give intervals that are too narrow).

A bootstrap resample draws ``n_clusters`` clusters with replacement; every value of a
cluster drawn ``k`` times counts ``k`` times. Statistics are computed on those weights
directly, without building the resampled arrays, so one resample of 100,000 values costs a
cumulative sum and a comparison. With every weight 1 each statistic equals numpy's: the
linear-interpolation percentile of :func:`numpy.percentile`, the mean, the sum per second.

Intervals are percentile intervals of the resampled statistic. The difference of two runs
is bootstrapped from two independent resamples (the runs are independent samples).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Upper bound on the elements of one block of resample weights (memory stays ~16 MB).
_BLOCK_ELEMENTS = 2_000_000


@dataclass(frozen=True)
class Sample:
    """Observations sorted ascending, each with the index of its cluster."""

    values: FloatArray
    clusters: IntArray
    n_clusters: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Sample:
        """One observation per cluster (TTFT, e2e, TPOT of each request)."""
        return cls.grouped([[v] for v in values])

    @classmethod
    def grouped(cls, groups: Sequence[Sequence[float]]) -> Sample:
        """Several observations per cluster (the ITL gaps of each request); a cluster may be
        empty (a request with one chunk still counts when requests are resampled)."""
        sizes = np.fromiter((len(g) for g in groups), dtype=np.int64, count=len(groups))
        values = np.fromiter((v for g in groups for v in g), dtype=np.float64, count=sizes.sum())
        clusters = np.repeat(np.arange(len(groups), dtype=np.int64), sizes)
        order = np.argsort(values, kind="stable")
        return cls(values[order], clusters[order], len(groups))

    @property
    def size(self) -> int:
        return int(self.values.size)

    @cached_property
    def cluster_sizes(self) -> IntArray:
        """Values per cluster."""
        return np.bincount(self.clusters, minlength=self.n_clusters).astype(np.int64)

    @cached_property
    def cluster_sums(self) -> FloatArray:
        """Sum of the values of each cluster."""
        sums = np.bincount(self.clusters, weights=self.values, minlength=self.n_clusters)
        return np.asarray(sums, dtype=np.float64)


@dataclass(frozen=True)
class Statistic:
    """What is computed from a (weighted) sample: a percentile ``q`` (0–100), the mean, or
    the sum divided by ``seconds`` (a rate: completions or tokens per second)."""

    kind: Literal["percentile", "mean", "rate"]
    q: float = 50.0
    seconds: float = 1.0

    def describe(self) -> str:
        if self.kind == "percentile":
            return f"p{self.q:g} (linear interpolation)"
        if self.kind == "rate":
            return f"sum / {self.seconds:.3f} s"
        return "mean"


@dataclass(frozen=True)
class Interval:
    """A point estimate and its bootstrap percentile interval."""

    estimate: float
    low: float
    high: float
    confidence: float
    resamples: int  # resamples that gave a value (a resample can be empty)


@dataclass(frozen=True)
class Difference:
    """Candidate − base, absolute and relative (``candidate / base − 1``), with intervals."""

    base: Interval
    candidate: Interval
    delta: Interval
    relative: Interval | None  # None when the base estimate is 0


def evaluate(
    sample: Sample, stats: Sequence[Statistic], counts: IntArray | None = None
) -> FloatArray:
    """Each of ``stats`` for each row of ``counts`` (how many times each cluster is drawn,
    shape ``(rows, sample.n_clusters)``; all ones when None): an array
    ``(len(stats), rows)``. A row without values gives NaN (a rate gives 0)."""
    if counts is None:
        counts = np.ones((1, sample.n_clusters), dtype=np.int32)
    out = np.full((len(stats), counts.shape[0]), math.nan)
    if sample.size == 0:
        for i, stat in enumerate(stats):
            if stat.kind == "rate":
                out[i] = 0.0
        return out
    # Totals and sums per row from per-cluster aggregates: rows × clusters, not × values.
    totals = counts @ sample.cluster_sizes
    sums = counts @ sample.cluster_sums if any(s.kind != "percentile" for s in stats) else None
    search = None
    if any(s.kind == "percentile" for s in stats):
        search = _Search.of(counts[:, sample.clusters], totals)
    with np.errstate(invalid="ignore", divide="ignore"):
        for i, stat in enumerate(stats):
            if stat.kind == "percentile":
                assert search is not None
                out[i] = search.percentile(sample.values, totals, stat.q)
                continue
            assert sums is not None
            if stat.kind == "rate":
                out[i] = sums / stat.seconds
            else:
                out[i] = np.where(totals > 0, sums / totals, math.nan)
    return out


@dataclass(frozen=True)
class _Search:
    """Cumulative weights of every row as one sorted array: row ``i`` is offset by
    ``i * (max total + 1)``, so one :func:`numpy.searchsorted` call serves all rows."""

    flat: npt.NDArray[Any]
    offsets: npt.NDArray[Any]
    starts: IntArray
    width: int

    @classmethod
    def of(cls, weights: npt.NDArray[Any], totals: IntArray) -> _Search:
        rows, width = weights.shape
        span = int(totals.max(initial=0)) + 1
        # 32-bit sums halve the memory traffic; 64 only when the offsets need it
        dtype: type[np.signedinteger[Any]] = np.int32 if rows * span < 2**31 - 1 else np.int64
        offsets: npt.NDArray[Any] = np.arange(rows, dtype=dtype) * span
        cumulative: npt.NDArray[Any] = np.cumsum(weights, axis=1, dtype=dtype)
        cumulative += offsets[:, None]
        starts = np.arange(rows, dtype=np.int64) * width
        return cls(cumulative.ravel(), offsets, starts, width)

    def index(self, position: IntArray) -> IntArray:
        """Per row, the first value whose cumulative weight exceeds ``position``."""
        query = (position + self.offsets).astype(self.flat.dtype)
        found = np.searchsorted(self.flat, query, side="right") - self.starts
        return np.asarray(np.minimum(found, self.width - 1), dtype=np.int64)

    def percentile(self, values: FloatArray, totals: IntArray, q: float) -> FloatArray:
        """numpy's linear percentile of each row's expanded sample (values repeated by
        weight): the expanded position ``k`` holds the value found by :meth:`index`."""
        position = (totals - 1) * (q / 100.0)
        low = np.floor(position).astype(np.int64)
        high = np.minimum(low + 1, totals - 1)
        j_low, j_high = self.index(low), self.index(high)
        out = values[j_low] + (position - low) * (values[j_high] - values[j_low])
        out[totals <= 0] = math.nan
        return np.asarray(out, dtype=np.float64)


def resample(sample: Sample, stats: Sequence[Statistic], resamples: int, seed: int) -> FloatArray:
    """``resamples`` bootstrap values of each of ``stats`` (shape ``(len(stats), resamples)``;
    NaN where a resample had no values). All statistics share the same resamples."""
    rng = np.random.default_rng(seed)
    n = sample.n_clusters
    out = np.full((len(stats), resamples), math.nan)
    if n == 0:
        return out
    block = max(1, min(resamples, _BLOCK_ELEMENTS // max(sample.size, n, 1)))
    for start in range(0, resamples, block):
        rows = min(block, resamples - start)
        # Cluster counts of each resample: n draws with replacement, counted per row.
        drawn = rng.integers(0, n, size=(rows, n)) + (np.arange(rows) * n)[:, None]
        counts = np.bincount(drawn.ravel(), minlength=rows * n).reshape(rows, n)
        out[:, start : start + rows] = evaluate(sample, stats, counts.astype(np.int32))
    return out


def interval(
    sample: Sample, stat: Statistic, confidence: float = 0.95, resamples: int = 1000, seed: int = 0
) -> Interval:
    """The statistic of ``sample`` with its bootstrap percentile interval."""
    point = float(evaluate(sample, [stat])[0, 0])
    draws = resample(sample, [stat], resamples, seed)[0]
    return _interval(point, draws, confidence)


def differences(
    base: Sample,
    candidate: Sample,
    base_stats: Sequence[Statistic],
    candidate_stats: Sequence[Statistic] | None = None,
    confidence: float = 0.95,
    resamples: int = 1000,
    seed: int = 0,
) -> list[Difference]:
    """Candidate − base of each statistic with bootstrap intervals, from independent
    resamples of both runs (``candidate_stats`` when a rate has its own window length)."""
    cand_stats = candidate_stats or base_stats
    base_points = evaluate(base, base_stats)[:, 0]
    cand_points = evaluate(candidate, cand_stats)[:, 0]
    base_draws = resample(base, base_stats, resamples, seed)
    cand_draws = resample(candidate, cand_stats, resamples, seed + 1)
    out = []
    for i in range(len(base_stats)):
        b, c = float(base_points[i]), float(cand_points[i])
        relative = None
        if b != 0 and math.isfinite(b):
            with np.errstate(invalid="ignore", divide="ignore"):
                ratios = cand_draws[i] / base_draws[i] - 1.0
            relative = _interval(c / b - 1.0, ratios, confidence)
        out.append(
            Difference(
                base=_interval(b, base_draws[i], confidence),
                candidate=_interval(c, cand_draws[i], confidence),
                delta=_interval(c - b, cand_draws[i] - base_draws[i], confidence),
                relative=relative,
            )
        )
    return out


def _interval(point: float, draws: FloatArray, confidence: float) -> Interval:
    finite = draws[np.isfinite(draws)]
    if finite.size == 0:
        return Interval(point, math.nan, math.nan, confidence, 0)
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(finite, [tail, 100.0 - tail])
    return Interval(point, float(low), float(high), confidence, int(finite.size))


def noise_band(history: Sequence[float], confidence: float = 0.95) -> tuple[float, float] | None:
    """Where a new run's value is expected to fall, given earlier runs of the same
    configuration: the normal prediction interval ``mean ± t·s·√(1 + 1/k)`` (Student's t
    with k − 1 degrees of freedom). With few runs it is wide, as it should be: the maximum
    of 3 earlier values is exceeded by a 4th one time in four, so a min–max spread is no
    noise band. None with fewer than 2 runs (one value says nothing about noise)."""
    from scipy import stats as sps

    k = len(history)
    if k < 2:
        return None
    data = np.asarray(history, dtype=np.float64)
    mean, spread = float(data.mean()), float(data.std(ddof=1))
    t = float(sps.t.ppf(0.5 + confidence / 2.0, k - 1))
    half = t * spread * math.sqrt(1.0 + 1.0 / k)
    return mean - half, mean + half
