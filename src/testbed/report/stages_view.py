"""The stages of one load treatment in the HTML report: a row per stage (its rate asked and
achieved, requests, latency percentiles, throughput, goodput) and TTFT/ITL against the
achieved rate — for a sweep and for a ``load.stages`` list alike."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from testbed.probes.load import plots
from testbed.report.plots import to_svg

_HEAD = (
    "stage", "rate asked", "rate achieved", "ok/total", "TTFT p50", "TTFT p99", "ITL p50",
    "e2e p99", "req/s", "goodput req/s",
)  # fmt: skip


def _number(value: Any) -> str:
    return "–" if not isinstance(value, int | float) else f"{value:.2f}"


def _row(stage: Mapping[str, Any]) -> str:
    load, harness = stage.get("load") or {}, stage.get("harness") or {}
    requests, throughput = stage.get("requests") or {}, stage.get("throughput") or {}
    cells = [
        html.escape(str(stage.get("stage"))),
        _number(load.get("rate")),
        _number(harness.get("achieved_rate")),
        f"{requests.get('ok', 0)}/{requests.get('total', 0)}",
        *(
            _number((stage.get(kind) or {}).get(stat))
            for kind, stat in (("ttft_ms", "p50"), ("ttft_ms", "p99"), ("itl_ms", "p50"))
        ),
        _number((stage.get("e2e_ms") or {}).get("p99")),
        _number(throughput.get("requests_per_s")),
        _number(throughput.get("goodput_requests_per_s")),
    ]
    return "<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


def stages_block(number: int, summary: Mapping[str, Any], stages: Sequence[Any]) -> str:
    """The table and the plot of a treatment's stages (several of them)."""
    points = [s for s in stages if isinstance(s, Mapping)]
    title = "Sweep" if summary.get("profile") == "sweep" else "Stages"
    head = "".join(f"<th>{h}</th>" for h in _HEAD)
    table = f"<table><tr>{head}</tr>{''.join(_row(s) for s in points)}</table>"
    figure = plots.latency_vs_throughput({title.lower(): points}, f"{title}: latency vs rate")
    return table + "\n" + to_svg(figure, f"sweep{number}", title)
