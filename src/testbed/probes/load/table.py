"""The terminal table of a load summary (one row per stage), for ``testbed load`` and
``testbed calibrate``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from testbed.probes.load import model_plots
from testbed.probes.server_metrics.summary import headline


def _f(value: Any, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def table(summary: Mapping[str, Any]) -> Table:
    """Stage rows: rate, throughput, latency percentiles, errors and the harness's lag/CPU."""
    stages = summary.get("stages") or [summary]
    out = Table(title=f"load · {summary.get('profile')} · {summary.get('setup', {}).get('url')}")
    for name in (
        "stage", "req/s", "tok/s", "TTFT p50", "TTFT p99", "ITL p50", "ITL p99",
        "TPOT p50", "e2e p99", "errors", "lag p99", "CPU ms/req",
    ):  # fmt: skip
        out.add_column(name, justify="left" if name == "stage" else "right")
    for s in stages:
        harness, requests = s["harness"], s["requests"]
        out.add_row(
            s["stage"],
            _f(s["throughput"]["requests_per_s"]),
            _f(s["throughput"]["output_tokens_per_s"], 0),
            _f(s["ttft_ms"]["p50"], 2),
            _f(s["ttft_ms"]["p99"], 2),
            _f(s["itl_ms"]["p50"], 2),
            _f(s["itl_ms"]["p99"], 2),
            _f(s["tpot_ms"]["p50"], 2),
            _f(s["e2e_ms"]["p99"], 1),
            f"{requests['errors']}/{requests['total']}",
            _f(harness["schedule_lag_ms"]["p99"], 2),
            _f(harness["cpu_ms_per_request"], 3),
        )
    return out


def turns_table(summary: Mapping[str, Any]) -> Table | None:
    """A multi-turn load's rows per turn index (the prefix cache shows in later turns'
    TTFT), or None for other loads."""
    by_turn = summary.get("by_turn")
    if not by_turn:
        return None
    sessions = summary.get("sessions") or {}
    out = Table(
        title=f"by turn · {sessions.get('count')} sessions ({sessions.get('ended_by_error')}"
        " ended by an error)"
    )
    for name in ("turn", "requests", "prompt tokens", "TTFT p50", "TTFT p90", "e2e p50"):
        out.add_column(name, justify="right")
    for t in by_turn:
        out.add_row(
            str(t["turn"]),
            f"{t['ok']}/{t['requests']}",
            _f(t["input_tokens_mean"], 0),
            _f(t["ttft_ms"]["p50"], 2),
            _f(t["ttft_ms"]["p90"], 2),
            _f(t["e2e_ms"]["p50"], 1),
        )
    return out


def print_summary(summary: Mapping[str, Any], out_dir: Path | None = None) -> None:
    console = Console()
    if not console.is_terminal:
        console.width = max(console.width, 150)  # a log file has room for every column
    console.print(table(summary))
    turns = turns_table(summary)
    if turns is not None:
        console.print(turns)
    by_model = model_plots.table(summary)
    if by_model is not None:
        console.print(by_model)
    verdict = summary.get("verdict", {})
    if verdict:
        console.print(f"verdict: [bold]{verdict.get('status')}[/bold] — {verdict.get('reason')}")
    if summary.get("max_rate_meeting_slo") is not None:
        console.print(f"highest rate meeting the SLOs: {summary['max_rate_meeting_slo']:.2f}/s")
    for line in headline(summary.get("server_metrics") or {}):
        style = "yellow" if line.startswith("MISMATCH") else "dim"
        console.print(f"[{style}]{escape(line)}[/{style}]")
    if out_dir is not None:
        console.print(f"records, summary.json and plots in {out_dir}")
