"""The load part of the HTML report: numbers for the plots, computed from each load
treatment's records with the formulas of :mod:`testbed.results.metrics`.

- latency CDFs of every load treatment overlaid (the steady-state population);
- TTFT/ITL against throughput: across the stages of a sweep, and across treatments that
  differ only in their load level (a ``load.concurrency`` or ``load.rate`` matrix);
- per treatment, requests in flight, completions per second and TTFT over time.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testbed.report import plots
from testbed.results import metrics
from testbed.results.files import read_records
from testbed.results.metrics import Record
from testbed.results.rundir import RECORDS

#: Treatments overlaid in one CDF figure, and treatments given their own time series.
MAX_OVERLAID = 12
MAX_DETAILED = 24


@dataclass
class LoadTreatment:
    """A load treatment's summary and records."""

    row: Mapping[str, Any]
    summary: Mapping[str, Any]
    records: Sequence[Record] = field(default_factory=list)

    @property
    def label(self) -> str:
        return str(self.row["dir"])


def gather(
    run_path: Path, rows: Sequence[Mapping[str, Any]], summaries: Mapping[str, Any]
) -> list[LoadTreatment]:
    """The load treatments that have a summary, with their records."""
    out = []
    for row in rows:
        summary = summaries.get(row["id"]) or {}
        if row["probe"] != "load" or "ttft_ms" not in summary:
            continue
        records = [r for r in read_records(run_path / row["dir"] / RECORDS) if "sent_ns" in r]
        out.append(LoadTreatment(row, summary, records))
    return out


def _population(item: LoadTreatment) -> list[Record]:
    """The records behind the headline numbers: the headline stage, inside its window."""
    window = item.summary.get("window") or {}
    stage = item.summary.get("stage")
    records = [r for r in item.records if r.get("stage") == stage] if stage else item.records
    if "start_ns" in window:
        win = metrics.Window(int(window["start_ns"]), int(window["end_ns"]))
        return metrics.in_window(records, win)
    return [r for r in records if metrics.is_ok(r)]


def latency_values(records: Sequence[Record]) -> dict[str, list[float]]:
    return {
        "ttft_ms": [v for r in records if (v := metrics.ttft_ms(r)) is not None],
        "itl_ms": [gap for r in records for gap in metrics.itl_ms(r)],
        "tpot_ms": [v for r in records if (v := metrics.tpot_ms(r)) is not None],
        "e2e_ms": [v for r in records if (v := metrics.e2e_ms(r)) is not None],
    }


def _point(stage: Mapping[str, Any]) -> dict[str, float | None]:
    point: dict[str, float | None] = {"rps": (stage.get("throughput") or {}).get("requests_per_s")}
    for metric in ("ttft_ms", "itl_ms"):
        for q in ("p50", "p99"):
            point[f"{metric}.{q}"] = (stage.get(metric) or {}).get(q)
    return point


def section(items: Sequence[LoadTreatment]) -> str:
    """The HTML of the load section (empty when the run has no load treatment)."""
    if not items:
        return ""
    parts = ["<h3>Latency distributions</h3>"]
    shown = items[:MAX_OVERLAID]
    series = {item.label: latency_values(_population(item)) for item in shown}
    parts.append(plots.latency_cdfs("cdf-all", series))
    if len(items) > MAX_OVERLAID:
        parts.append(f'<p class="muted">first {MAX_OVERLAID} of {len(items)} treatments shown</p>')
    groups = _level_groups(items)
    if groups:
        parts.append("<h3>Latency against throughput across load levels</h3>")
        parts.append(plots.latency_vs_throughput("levels", groups, "Across load levels"))
    for number, item in enumerate(items[:MAX_DETAILED]):
        parts.append(_treatment(number, item))
    if len(items) > MAX_DETAILED:
        parts.append(f'<p class="muted">time series of the first {MAX_DETAILED} treatments</p>')
    return "\n".join(parts)


def _level_groups(items: Sequence[LoadTreatment]) -> dict[str, list[dict[str, float | None]]]:
    """Treatments equal but for their ``load.*`` factors, as curves of ≥ 2 points."""
    groups: dict[str, list[dict[str, float | None]]] = {}
    for item in items:
        fixed = {k: v for k, v in item.row["params"].items() if not str(k).startswith("load.")}
        label = "+".join(item.row.get("deployments") or []) + "".join(
            f" {k}={v}" for k, v in sorted(fixed.items())
        )
        groups.setdefault(label, []).append(_point(item.summary))
    return {label: points for label, points in groups.items() if len(points) >= 2}


def _treatment(number: int, item: LoadTreatment) -> str:
    parts = [f'<h3 id="load-{html.escape(item.row["id"])}">{html.escape(item.label)}</h3>']
    stages = item.summary.get("stages")
    if isinstance(stages, list) and len(stages) >= 2:
        points = [_point(s) for s in stages if isinstance(s, Mapping)]
        parts.append(plots.latency_vs_throughput(f"sweep{number}", {"sweep": points}, "Sweep"))
    if item.records:
        parts.append(_time_series(number, item))
    else:
        parts.append('<p class="muted">no records</p>')
    return "\n".join(parts)


def _time_series(number: int, item: LoadTreatment) -> str:
    records = item.records
    origin = min(r["sent_ns"] for r in records if r.get("sent_ns") is not None)
    span = max((r.get("done_ns") or r.get("failed_ns") or origin) for r in records) - origin
    step = max(10_000_000, span // 300)  # ≤ ~300 samples whatever the length
    flight = [((t - origin) / 1e9, n) for t, n in metrics.in_flight(records, step_ns=step)]
    done = sorted(r["done_ns"] for r in records if metrics.is_ok(r) and r.get("done_ns"))
    # completions are counted in coarser bins: at 10 ms a bin holds 0 or 1 of them
    completions = _rate_series(done, origin, max(100_000_000, span // 60))
    ttft = [
        ((r["sent_ns"] - origin) / 1e9, v)
        for r in records
        if r.get("sent_ns") is not None and (v := metrics.ttft_ms(r)) is not None
    ]
    window = item.summary.get("window") or {}
    shade = None
    if "start_ns" in window and item.summary.get("stages") is None:
        shade = ((window["start_ns"] - origin) / 1e9, (window["end_ns"] - origin) / 1e9)
    return plots.time_series(f"ts{number}", flight, completions, ttft, shade)


def _rate_series(times_ns: Sequence[int], origin: int, step_ns: int) -> list[tuple[float, float]]:
    """Events per second in consecutive bins of ``step_ns``."""
    if not times_ns:
        return []
    bins: dict[int, int] = {}
    for t in times_ns:
        bins[(t - origin) // step_ns] = bins.get((t - origin) // step_ns, 0) + 1
    last = max(bins)
    return [((i + 0.5) * step_ns / 1e9, bins.get(i, 0) / (step_ns / 1e9)) for i in range(last + 1)]
