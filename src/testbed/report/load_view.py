"""The load part of the HTML report: each load treatment's records and summary, drawn by
``probes.load.plots`` (the figures the probe writes as PNGs) and inlined as SVG.

- latency CDFs of every load treatment overlaid (the steady-state population);
- a treatment of several stages (a sweep, a ``load.stages`` list): a row per stage and
  TTFT/ITL against the achieved rate (:mod:`.stages_view`);
- TTFT/ITL against throughput across treatments that
  differ only in their load level (a ``load.concurrency`` or ``load.rate`` matrix);
- per treatment, requests in flight, completions per second and TTFT over time, after a
  flag for each stage that ran fewer requests than it asked for;
- a load over several models or adapters: each one's figures and its TTFT as a bar;
- a multi-turn load: its figures per turn index and TTFT by turn (:mod:`.turns_view`).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testbed.probes.load import model_plots, plots
from testbed.report.captures_view import prometheus_block
from testbed.report.plots import to_svg
from testbed.report.server_metrics_view import section as server_section
from testbed.report.stages_view import stages_block
from testbed.report.turns_view import turns_block
from testbed.results import metrics
from testbed.results.files import read_records
from testbed.results.metrics import Record
from testbed.results.run_summary import TreatmentRow
from testbed.results.rundir import RECORDS

#: Treatments overlaid in one CDF figure, and treatments given their own time series.
MAX_OVERLAID = 12
MAX_DETAILED = 24


@dataclass
class LoadTreatment:
    """A load treatment's summary and records."""

    row: TreatmentRow
    summary: Mapping[str, Any]
    records: Sequence[Record] = field(default_factory=list)
    path: Path | None = None  # the treatment directory

    @property
    def label(self) -> str:
        return self.row.dir


def gather(
    run_path: Path, rows: Sequence[TreatmentRow], summaries: Mapping[str, Any]
) -> list[LoadTreatment]:
    """The load treatments that have a summary and records (the plots are drawn from the
    records: another harness's results have none, and their figures are in the headline)."""
    out = []
    for row in rows:
        summary = summaries.get(row.id) or {}
        if row.probe != "load" or "ttft_ms" not in summary:
            continue
        records = [r for r in read_records(run_path / row.dir / RECORDS) if "sent_ns" in r]
        if not records:
            continue
        out.append(LoadTreatment(row, summary, records, run_path / row.dir))
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


def section(items: Sequence[LoadTreatment]) -> str:
    """The HTML of the load section (empty when the run has no load treatment)."""
    if not items:
        return ""
    parts = ["<h3>Latency distributions</h3>"]
    shown = items[:MAX_OVERLAID]
    populations = {item.label: _population(item) for item in shown}
    parts.append(to_svg(plots.latency_cdfs(populations), "cdf-all", "latency CDFs"))
    if len(items) > MAX_OVERLAID:
        parts.append(f'<p class="muted">first {MAX_OVERLAID} of {len(items)} treatments shown</p>')
    groups = _level_groups(items)
    if groups:
        parts.append("<h3>Latency against throughput across load levels</h3>")
        title = "Across load levels"
        parts.append(to_svg(plots.latency_vs_throughput(groups, title), "levels", title))
    for number, item in enumerate(items[:MAX_DETAILED]):
        parts.append(_treatment(number, item))
    if len(items) > MAX_DETAILED:
        parts.append(f'<p class="muted">time series of the first {MAX_DETAILED} treatments</p>')
    return "\n".join(parts)


def _level_groups(items: Sequence[LoadTreatment]) -> dict[str, list[Mapping[str, Any]]]:
    """Treatments equal but for their ``load.*`` factors, as curves of ≥ 2 summaries."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for item in items:
        fixed = {k: v for k, v in item.row.params.items() if not str(k).startswith("load.")}
        label = "+".join(item.row.deployments) + "".join(
            f" {k}={v}" for k, v in sorted(fixed.items())
        )
        groups.setdefault(label, []).append(item.summary)
    return {label: points for label, points in groups.items() if len(points) >= 2}


def _cut_short(summary: Mapping[str, Any]) -> str:
    """A flag for each stage that ran fewer requests than it asked for (its duration ended
    it first): the numbers below describe only the ones that ran."""
    stages = summary.get("stages")
    listed = [s for s in stages if isinstance(s, Mapping)] if isinstance(stages, list) else []
    return "".join(
        f'<p class="flag">⚠ {html.escape(str(s.get("stage")))}:'
        f" {html.escape(str(s['cut_short']))}</p>"
        for s in listed or [summary]
        if s.get("cut_short")
    )


def _models_block(number: int, summary: Mapping[str, Any], models: Mapping[str, Any]) -> str:
    """Each model's (adapter's) figures in a table, and its TTFT as a bar."""
    rows = "".join(
        f"<tr><td>{html.escape(str(name))}</td>"
        f"<td>{m['requests']['ok']}/{m['requests']['total']}</td>"
        + "".join(
            f"<td>{'–' if v is None else f'{v:.2f}'}</td>"
            for v in (
                m["throughput"]["requests_per_s"],
                m["ttft_ms"]["p50"],
                m["ttft_ms"]["p99"],
                m["itl_ms"]["p50"],
                m["e2e_ms"]["p99"],
            )
        )
        + "</tr>"
        for name, m in models.items()
    )
    head = "".join(
        f"<th>{h}</th>"
        for h in ("model", "ok", "req/s", "TTFT p50", "TTFT p99", "ITL p50", "e2e p99")
    )
    title = f"TTFT by model · {summary.get('stage')}"
    bars = to_svg(model_plots.ttft_by_model(models, title), f"models{number}", title)
    return f"<table><tr>{head}</tr>{rows}</table>\n{bars}"


def _treatment(number: int, item: LoadTreatment) -> str:
    parts = [f'<h3 id="load-{html.escape(item.row.id)}">{html.escape(item.label)}</h3>']
    parts.append(_cut_short(item.summary))
    stages = item.summary.get("stages")
    if isinstance(stages, list) and len(stages) >= 2:
        parts.append(stages_block(number, item.summary, stages))
    models = item.summary.get("models")
    if isinstance(models, Mapping) and models:
        parts.append(_models_block(number, item.summary, models))
    by_turn = item.summary.get("by_turn")
    if isinstance(by_turn, list) and by_turn:  # a multi-turn load
        parts.append(turns_block(f"turns{number}", item.summary, by_turn))
    if item.records:
        window = item.summary.get("window") or {}
        shade = None
        if "start_ns" in window and item.summary.get("stages") is None:
            shade = (int(window["start_ns"]), int(window["end_ns"]))
        series = plots.time_series(item.records, shade)
        parts.append(to_svg(series, f"ts{number}", "time series"))
        if item.path is not None:
            key = f"sm{number}"
            parts.append(server_section(item.path, item.summary, item.records, key, shade))
            parts.append(prometheus_block(item.path, f"prom{number}"))
    else:
        parts.append('<p class="muted">no records</p>')
    return "\n".join(parts)
