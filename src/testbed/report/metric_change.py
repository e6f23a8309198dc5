"""One metric's change between two treatments: what the records say, and the verdict.

Step 3 of ``testbed compare`` (:mod:`testbed.report.compare` states the rules): the evidence
is the bootstrap interval of the change, resampled from both treatments' records
(:mod:`testbed.results.stats`), or why there is none; :func:`judge` weighs it, the
threshold and the noise band of earlier runs into one outcome.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from testbed.core.ids import short_hash
from testbed.report.thresholds import Threshold
from testbed.results import stats
from testbed.results.files import read_records
from testbed.results.rundir import RECORDS, read_summary
from testbed.results.summaries import Samples, direction

#: A percentile is judged from records only when at least this many observations lie
#: beyond it (n × (1 − q) ≥ 5): the bootstrap of an extreme percentile of a small sample
#: (p99.9 of 300 requests is nearly the maximum) gives intervals far too narrow.
MIN_TAIL = 5


def tail_shortfall(stat: stats.Statistic, size: int) -> int | str | None:
    """How many observations a percentile ``stat`` needs when a sample of ``size`` leaves
    fewer than :data:`MIN_TAIL` beyond it ("∞" for p100); None when it has enough."""
    if stat.kind != "percentile" or size * (1 - stat.q / 100) >= MIN_TAIL:
        return None
    return math.ceil(MIN_TAIL / (1 - stat.q / 100)) if stat.q < 100 else "∞"


@dataclass
class MetricResult:
    """One metric of one treatment pair, judged."""

    treatment: str  # the candidate's directory name
    metric: str
    direction: int
    base: float
    candidate: float
    threshold: Threshold
    outcome: (
        str  # regression | improvement | no change | not significant | within noise | unverified
    )
    interval: tuple[float, float] | None = None  # of the relative change
    method: str = ""
    band: tuple[float, float, int] | None = None  # min, max, runs of history

    @property
    def change(self) -> float | None:
        if self.base == 0:
            return None
        return self.candidate / self.base - 1.0


@dataclass(frozen=True)
class Evidence:
    """What the records say about one metric's change: bootstrap intervals of the relative
    change and of the absolute difference, or only why there are none."""

    method: str
    relative: tuple[float, float] | None = None
    delta: tuple[float, float] | None = None


def judge(
    treatment: str,
    metric: str,
    base: float,
    candidate: float,
    threshold: Threshold,
    evidence: Evidence | None,
    history: Sequence[float],
    confidence: float = 0.95,
) -> MetricResult:
    """The outcome of one metric (step 3 of :mod:`testbed.report.compare`'s rules)."""
    sense = direction(metric)
    result = MetricResult(treatment, metric, sense, base, candidate, threshold, "no change")
    interval = None
    if evidence is not None:
        result.method = evidence.method
        interval = evidence.relative if threshold.relative else evidence.delta
        result.interval = evidence.relative
        if interval is not None and not all(map(math.isfinite, interval)):
            interval = None
    band = stats.noise_band(history, confidence)
    if band is not None:
        result.band = (band[0], band[1], len(history))
    if not threshold.exceeded(base, candidate):
        return result
    name = "regression" if (candidate - base) * sense < 0 else "improvement"
    up = candidate > base
    if interval is None and result.band is None:
        result.outcome = "unverified"
    elif result.band is not None and not (
        candidate > result.band[1] if up else candidate < result.band[0]
    ):
        result.outcome = "within noise"
    elif interval is None:
        result.outcome = name  # outside the noise band of ≥ 2 earlier runs
    elif not (interval[0] > 0 if up else interval[1] < 0):
        result.outcome = "not significant"
    elif not (interval[0] > threshold.value if up else interval[1] < -threshold.value):
        result.outcome = f"possible {name}"  # significant, but maybe within the threshold
    else:
        result.outcome = name
    return result


def intervals(
    folders: tuple[Path, Path],
    seed_id: str,
    names: Sequence[str],
    confidence: float,
    resamples: int,
) -> dict[str, Evidence]:
    """Bootstrap intervals of the change of every metric the records can give, from the base
    and candidate treatment ``folders``; ``seed_id`` (the candidate's id) seeds the resampling."""
    base, candidate = folders
    b_summary = read_summary(base)
    c_summary = read_summary(candidate)
    if "window" not in b_summary and "stages" not in b_summary:
        return {}  # not a load treatment: nothing to resample
    b_samples = Samples(b_summary, read_records(base / RECORDS))
    c_samples = Samples(c_summary, read_records(candidate / RECORDS))
    groups: dict[tuple[int, int], list[tuple[str, stats.Statistic, stats.Statistic]]] = {}
    found: dict[tuple[int, int], tuple[stats.Sample, stats.Sample]] = {}
    out: dict[str, Evidence] = {}
    for name in names:
        b, c = b_samples.get(name), c_samples.get(name)
        if b is None or c is None:
            continue
        smallest = min(b[0].size, c[0].size)
        needed = tail_shortfall(b[1], smallest)
        if needed is not None:
            out[name] = Evidence(
                f"too few observations for p{b[1].q:g} ({smallest}; {needed} needed)"
            )
            continue
        key = (id(b[0]), id(c[0]))
        found[key] = (b[0], c[0])
        groups.setdefault(key, []).append((name, b[1], c[1]))
    for key, members in groups.items():
        b_sample, c_sample = found[key]
        seed = int(short_hash([seed_id, members[0][0]], 8), 16)
        diffs = stats.differences(
            b_sample,
            c_sample,
            [m[1] for m in members],
            [m[2] for m in members],
            confidence=confidence,
            resamples=resamples,
            seed=seed,
        )
        for (name, stat, _), diff in zip(members, diffs, strict=True):
            method = (
                f"bootstrap of requests, {resamples} resamples, {stat.describe()},"
                f" n={b_sample.n_clusters}/{c_sample.n_clusters},"
                f" {confidence:.0%} interval"
            )
            relative = (diff.relative.low, diff.relative.high) if diff.relative else None
            out[name] = Evidence(method, relative, (diff.delta.low, diff.delta.high))
    return out
