"""How a comparison is shown: a terminal table of regressions and improvements with their
evidence (values, change, interval, threshold, noise band, method), and a JSON document
for CI (``--json``)."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console
from rich.table import Table

from testbed.report.compare import Comparison
from testbed.report.metric_change import MetricResult

SCHEMA_VERSION = 1
_STYLE = {
    "regression": "bold red",
    "possible regression": "red",
    "improvement": "green",
    "possible improvement": "green",
    "unverified": "yellow",
    "within noise": "dim",
    "not significant": "dim",
    "no change": "dim",
}


def _pct(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "–"
    return f"{value * 100:+.1f}%"


def _number(value: float) -> str:
    return f"{value:.4g}"


def _interval(result: MetricResult) -> str:
    if result.interval is None:
        return "–"
    low, high = result.interval
    return f"[{_pct(low)}, {_pct(high)}]"


def _band(result: MetricResult) -> str:
    if result.band is None:
        return "–"
    low, high, runs = result.band
    return f"{_number(low)}–{_number(high)} ({runs} runs)"


def table(comparison: Comparison, show_all: bool = False) -> Table:
    """The judged metrics: everything beyond its threshold (or every one with ``show_all``)."""
    shown = [r for r in comparison.results if show_all or r.outcome != "no change"]
    order = list(_STYLE)
    shown.sort(key=lambda r: (order.index(r.outcome) if r.outcome in order else 9, r.treatment))
    result = Table(title="Candidate against base", title_justify="left")
    for column in ("treatment", "metric", "better", "base", "candidate", "change",
                   "interval", "threshold", "noise band", "outcome"):  # fmt: skip
        result.add_column(column, overflow="fold")
    for r in shown:
        style = _STYLE.get(r.outcome, "")
        better = "lower" if r.direction < 0 else "higher"
        result.add_row(
            r.treatment,
            r.metric,
            better,
            _number(r.base),
            _number(r.candidate),
            _pct(r.change),
            _interval(r),
            str(r.threshold),
            _band(r),
            f"[{style}]{r.outcome}[/{style}]",
        )
    return result


def render(comparison: Comparison, console: Console, show_all: bool = False) -> None:
    """Setup differences (when forced), warnings, verdict changes, the table, the outcome."""
    for line in comparison.setup_differences:
        console.print(f"[yellow]setup differs (--force):[/yellow] {line}")
    for line in comparison.warnings:
        console.print(f"[yellow]warning:[/yellow] {line}")
    for line in comparison.skipped:  # a pair that tested less than its partner: shown
        console.print(f"[yellow]not compared:[/yellow] {line}")
    for line in comparison.notes:  # what another harness's results let us compare
        console.print(line)
    for change in comparison.verdict_changes:
        style = "bold red" if change["kind"] == "regression" else "green"
        console.print(
            f"[{style}]verdict {change['kind']}[/{style}]: {change['treatment']}"
            f" {change['base']} → {change['candidate']} {change['reason'][:200]}"
        )
    console.print(table(comparison, show_all))
    methods = sorted({r.method for r in comparison.results if r.method})
    for method in methods[:3]:
        console.print(f"[dim]interval: {method}[/dim]")
    counts = {o: sum(1 for r in comparison.results if r.outcome == o) for o in _STYLE}
    summary = ", ".join(f"{n} {o}" for o, n in counts.items() if n)
    if comparison.treatments:
        console.print(which_is_better(comparison))
    if comparison.skipped:
        summary += f"{', ' if summary else ''}{len(comparison.skipped)} pair(s) skipped"
    nothing = comparison.nothing_compared
    if comparison.failed:
        console.print(f"[bold red]REGRESSION[/bold red] · {summary}")
    elif nothing is not None and not comparison.unresolved:  # never "no regression" then
        console.print(f"[bold red]{nothing}[/bold red] (exit 5)")
    else:
        console.print(f"[bold green]no regression[/bold green] · {summary or 'nothing compared'}")
    if comparison.unresolved:  # why the exit is 3 whatever the line above says
        missing = ", ".join(comparison.unresolved)
        console.print(f"[bold red]ERROR[/bold red] · no result to compare: {missing}")


def which_is_better(comparison: Comparison) -> str:
    """Two treatments: which one the significant changes favour, and on what."""
    better = [f"{r.metric} {_pct(r.change)}" for r in comparison.improvements]
    worse = [f"{r.metric} {_pct(r.change)}" for r in comparison.regressions]
    cand, base = comparison.candidate.name, comparison.base.name
    if better and not worse:
        return f"better: {cand} (candidate) beats {base} on {', '.join(better)}"
    if worse and not better:
        return f"better: {base} (base) beats {cand} on {', '.join(worse)}"
    if better and worse:
        return f"mixed: {cand} is better on {', '.join(better)} and worse on {', '.join(worse)}"
    return f"neither is significantly better beyond the thresholds: {cand} vs {base}"


def document(comparison: Comparison) -> dict[str, Any]:
    """The comparison as JSON (``--json FILE``)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "testbed.compare",
        "base": str(comparison.base),
        "candidate": str(comparison.candidate),
        "failed": comparison.failed,
        "status": comparison.status.value,
        "nothing_compared": comparison.nothing_compared,
        "skipped": comparison.skipped,
        "setup_differences": comparison.setup_differences,
        "warnings": comparison.warnings,
        "notes": comparison.notes,
        "verdict_changes": comparison.verdict_changes,
        "metrics": [
            {
                "treatment": r.treatment,
                "metric": r.metric,
                "direction": "lower" if r.direction < 0 else "higher",
                "base": r.base,
                "candidate": r.candidate,
                "change": r.change,
                "interval": list(r.interval) if r.interval else None,
                "method": r.method,
                "threshold": str(r.threshold),
                "threshold_source": r.threshold.source,
                "noise_band": list(r.band) if r.band else None,
                "outcome": r.outcome,
            }
            for r in comparison.results
        ],
    }
