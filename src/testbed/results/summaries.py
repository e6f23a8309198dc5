"""Reading treatment summaries: the metrics they hold, which way is better, and the samples
behind each metric in the records.

A metric is named by its dotted path in ``summary.json``: ``ttft_ms.p99``,
``throughput.requests_per_s``, ``stages.saturation.itl_ms.p50`` (a sweep's stages are
addressed by stage name). Probes written later (correctness, ab) add their own keys; their
numeric leaves become metrics too, with a direction guessed from the name and none when the
name says nothing (then the metric is shown, never judged).

:class:`Samples` rebuilds, from ``records.jsonl``, the very population a load metric was
computed from (the stage's records, the steady-state window), so that a comparison can
bootstrap its confidence interval (:mod:`testbed.results.stats`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

from testbed.results import metrics
from testbed.results.metrics import Record
from testbed.results.stats import Sample, Statistic

Direction = Literal[-1, 0, 1]  # -1: lower is better, 1: higher is better, 0: not judged
LOWER: Direction = -1
HIGHER: Direction = 1
NEUTRAL: Direction = 0

#: Summary keys that are bookkeeping, not measurements.
_NOT_METRICS = frozenset(
    {
        "schema_version",
        "id",
        "dir",
        "probe",
        "params",
        "workers",
        "attempt",
        "started",
        "records",
        "verdict",
        "window",
        "load",
        "selfcheck",
        "notes",
        "slo_violations",
        "profile",
        "stage",
        "duration_s",
        "seed",
        "run",  # what `testbed load` records about itself (machine, flags, version)
        "clock",  # the wall/monotonic anchor of the records' stamps
    }
)
#: Numbers about a test rather than the product (p-values, levels, sample sizes): never judged.
_NEUTRAL_NAMES = ("_p", "p_value", "p_meets", "p_violates", "confidence", "min_samples", "n_")
_LATENCIES = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")
_STATS = {**{name: float(q) for name, q in metrics.PERCENTILES.items()}}
_HIGHER_WORDS = (
    "hit_rate",
    "accuracy",
    "pass_rate",
    "agreement",
    "similarity",
    "score",
    "passed",
    "match",
)
_LOWER_WORDS = ("fail", "error", "mismatch", "diverg", "latency", "_ms")


def summary_metrics(summary: Mapping[str, Any]) -> dict[str, float]:
    """Every finite numeric leaf of a treatment summary, by dotted name."""
    out: dict[str, float] = {}
    for key, value in summary.items():
        if key in _NOT_METRICS:
            continue
        if key == "stages" and isinstance(value, list):
            for stage in value:
                if isinstance(stage, Mapping) and "stage" in stage:
                    for name, number in summary_metrics(stage).items():
                        out[f"stages.{stage['stage']}.{name}"] = number
            continue
        out.update(_leaves(key, value))
    return out


def _leaves(prefix: str, value: Any) -> Iterator[tuple[str, float]]:
    if isinstance(value, bool):
        return
    if isinstance(value, int | float):
        if math.isfinite(value):
            yield prefix, float(value)
    elif isinstance(value, Mapping):
        for key, inner in value.items():
            if key not in _NOT_METRICS:
                yield from _leaves(f"{prefix}.{key}", inner)


def direction(metric: str) -> Direction:
    """Which way is better for ``metric`` (lower latency, higher throughput)."""
    parts = metric.split(".")
    if parts[0] == "stages" and len(parts) > 2:
        parts = parts[2:]
    head, last = parts[0], parts[-1]
    if last.endswith(_NEUTRAL_NAMES[:4]) or last.startswith(_NEUTRAL_NAMES[4:]):
        return NEUTRAL
    if head in ("harness", "requests") and last != "success_ratio":
        return LOWER if head == "requests" and last == "errors" else NEUTRAL
    if head in _LATENCIES:
        return LOWER if last in _STATS or last == "mean" else NEUTRAL
    if head in {"throughput", "max_rate_meeting_slo"} or last == "success_ratio":
        return HIGHER
    if last in ("n", "std", "count", "total"):
        return NEUTRAL
    lowered = metric.lower()
    if any(word in lowered for word in _HIGHER_WORDS):
        return HIGHER
    if any(word in lowered for word in _LOWER_WORDS):
        return LOWER
    return NEUTRAL


class Samples:
    """The samples behind one treatment's load metrics, each built once from its records
    (metrics that share a sample — ``ttft_ms.p50`` and ``ttft_ms.p99`` — share the object,
    so a bootstrap can resample it once for all of them)."""

    def __init__(self, summary: Mapping[str, Any], records: Sequence[Record]) -> None:
        self.summary = summary
        self.records = records
        #: goodput counts requests meeting the SLO the verdict judged
        self.slo: Mapping[str, Any] | None = (
            (summary.get("verdict") or {}).get("evidence", {}).get("slo")
        )
        self._cache: dict[tuple[str, str], Sample | None] = {}

    def get(self, metric: str) -> tuple[Sample, Statistic] | None:
        """The sample and statistic behind ``metric``, or None when the records cannot give
        one (not a load metric, or a summary without its window)."""
        parts = metric.split(".")
        stage: Mapping[str, Any] = self.summary
        prefix = ""
        if parts[0] == "stages" and len(parts) > 2:
            found = next(
                (s for s in self.summary.get("stages") or [] if str(s.get("stage")) == parts[1]),
                None,
            )
            if found is None:
                return None
            stage, prefix, parts = found, parts[1], parts[2:]
        window = stage.get("window")
        if len(parts) != 2 or not isinstance(window, Mapping):
            return None
        win = metrics.Window(int(window["start_ns"]), int(window["end_ns"]))
        head, last = parts
        stat = _statistic(head, last, win)
        if stat is None:
            return None
        key = (prefix, head if head in _LATENCIES else f"{head}.{last}")
        if key not in self._cache:
            population = [r for r in self.records if r.get("stage") == stage.get("stage")]
            self._cache[key] = _build(head, last, population, win, self.slo)
        sample = self._cache[key]
        return None if sample is None else (sample, stat)


def _statistic(head: str, last: str, win: metrics.Window) -> Statistic | None:
    if head in _LATENCIES:
        if last == "mean":
            return Statistic("mean")
        return Statistic("percentile", q=_STATS[last]) if last in _STATS else None
    if head == "throughput":
        return Statistic("rate", seconds=win.seconds) if win.seconds > 0 else None
    if (head, last) == ("requests", "success_ratio"):
        return Statistic("mean")
    return None


def _build(
    head: str,
    last: str,
    population: list[Record],
    win: metrics.Window,
    slo: Mapping[str, Any] | None,
) -> Sample | None:
    """The sample of one quantity. Latencies: the ok requests sent inside the window (ITL
    gaps grouped by request). Rates: every request of the stage is a cluster whose value is
    its contribution (1 if it completed inside the window, or its tokens received inside)."""
    if head in _LATENCIES:
        inside = metrics.in_window(population, win)
        if head == "itl_ms":
            return Sample.grouped([metrics.itl_ms(r) for r in inside])
        per_request = {
            "ttft_ms": metrics.ttft_ms,
            "tpot_ms": metrics.tpot_ms,
            "e2e_ms": metrics.e2e_ms,
        }[head]
        return Sample.of([v for r in inside if (v := per_request(r)) is not None])
    if head == "requests":
        return Sample.of([1.0 if metrics.is_ok(r) else 0.0 for r in population])
    if last == "requests_per_s":
        values = [1.0 if r.get("done_ns") in win and metrics.is_ok(r) else 0.0 for r in population]
    elif last == "output_tokens_per_s":
        values = [metrics.tokens_in_window(r, win) if metrics.is_ok(r) else 0.0 for r in population]
    elif last == "goodput_requests_per_s" and slo:
        values = [
            1.0 if r.get("done_ns") in win and metrics.meets_slo_request(r, slo) else 0.0
            for r in population
        ]
    else:
        return None
    return Sample.of(values)
