"""The A/B evidence as terminal tables: criteria with intervals and tests, latency, errors.

``render_ab(summary, console)`` takes an ab treatment's summary (the whole summary.json or its
``ab`` part) and prints what decided the verdict: for each criterion the observed value, its
interval, the threshold, n, the test and its p-value, and the status; then the latency
comparison per metric, the error rates and a few prompts whose outputs disagree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from testbed.report.live import STYLE
from testbed.results.verdict import Status


def _num(value: Any, digits: int = 4) -> str:
    if value is None:
        return "—"
    if isinstance(value, int):
        return str(value)
    return f"{value:.{digits}g}"


def _interval(bounds: Sequence[Any] | None, digits: int = 4) -> str:
    if not bounds or bounds[0] is None or bounds[1] is None:
        return "—"
    return f"[{_num(bounds[0], digits)}, {_num(bounds[1], digits)}]"


def _p(value: Any) -> str:
    if value is None:
        return "—"
    return "<1e-300" if value < 1e-300 else f"{value:.2g}"


def _status(value: str) -> str:
    style = STYLE.get(Status(value), "")
    return f"[{style}]{value}[/{style}]" if style else value


def criteria_table(ab: Mapping[str, Any]) -> Table:
    """One row per criterion: what was observed, its interval, the threshold and the test."""
    level = f"{ab.get('confidence', 0.95):.0%}"
    table = Table(title="A/B criteria", title_justify="left")
    for column in ("criterion", "observed", f"{level} interval", "threshold", "n", "test", "p"):
        table.add_column(column, overflow="fold")
    table.add_column("status")
    for entry in ab.get("criteria", []):
        table.add_row(
            escape(entry["metric"]),
            _num(entry["observed"]),
            _interval(entry["interval"]),
            f"{entry['direction']} {_num(entry['threshold'])}",
            f"{entry['n']}" + (" (<min)" if entry["n"] < entry["min_samples"] else ""),
            escape(entry["test"].split(",")[0]),
            _p(entry["p_value"]),
            _status(entry["status"]),
        )
    return table


def latency_table(ab: Mapping[str, Any]) -> Table:
    """Per latency metric: both p50s, their ratio, the shift, the paired and unpaired tests."""
    level = f"{ab.get('confidence', 0.95):.0%}"
    table = Table(title="Latency (ms)", title_justify="left")
    for column in (
        "metric",
        "n",
        f"{ab.get('stable', 'stable')} p50",
        f"{ab.get('canary', 'canary')} p50",
        f"ratio [{level}]",
        f"shift ms [{level}]",
        "Wilcoxon p",
        "Mann–Whitney p",
    ):
        table.add_column(escape(column))
    for metric, row in ab.get("latency", {}).items():
        n = row["n"]
        table.add_row(
            metric,
            "/".join(str(x) for x in n) if isinstance(n, list) else str(n),
            _num(row["stable_p50"]),
            _num(row["canary_p50"]),
            f"{_num(row['ratio'])} {_interval(row['ci'])}",
            f"{_num(row['shift_ms'], 3)} {_interval(row['shift_ci'], 3)}",
            _p(row["wilcoxon_p"]),
            _p(row["mannwhitney_p"]),
        )
    return table


def _lines(ab: Mapping[str, Any]) -> list[str]:
    level = f"{ab.get('confidence', 0.95):.0%}"
    agreement, errors = ab.get("agreement", {}), ab.get("errors", {})
    lines = []
    if agreement:
        similar = agreement.get("similarity")
        lines.append(
            f"agreement: exact {_num(agreement.get('exact'))}"
            + (f", similarity {_num(similar)}" if similar is not None else "")
            + f" over {agreement.get('n', 0)} compared outputs ({escape(agreement['method'])});"
            f" {level} interval {_interval(agreement.get('ci'))}"
        )
    if errors:
        s, c = errors["stable"], errors["canary"]
        lines.append(
            f"errors: stable {s['errors']}/{s['sent']}, canary {c['errors']}/{c['sent']};"
            f" difference {_num(errors.get('difference'))} {level} {_interval(errors.get('ci'))}"
        )
    for example in agreement.get("disagreements", [])[:3]:
        lines.append(
            f"  differs on {escape(str(example['prompt_id']))}:"
            f" stable {escape(repr(example['stable'][:60]))}"
            f" · canary {escape(repr(example['canary'][:60]))}"
        )
    return lines


def render_ab(summary: Mapping[str, Any], console: Console) -> None:
    """Print the evidence of one ab treatment (``summary``: summary.json or its ``ab``)."""
    ab = summary.get("ab", summary)
    mode = ab.get("mode", "paired")
    pairs = f", {ab['n_pairs']} complete pairs" if ab.get("n_pairs") is not None else ""
    console.print(
        f"[bold]A/B[/bold] {escape(str(ab.get('stable')))} (stable) vs"
        f" {escape(str(ab.get('canary')))} (canary) · {mode}{pairs} · seed {ab.get('seed')}"
    )
    console.print(criteria_table(ab))
    console.print(latency_table(ab))
    for line in _lines(ab):
        console.print(line)
