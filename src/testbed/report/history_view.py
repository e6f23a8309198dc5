"""``testbed history`` in the terminal and as JSON: each series with a change point, the
regressions the newest run carries first (the page is :mod:`testbed.report.history_html`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from testbed.results.history import RunPoint, Series

SCHEMA_VERSION = 1


def render(series: Sequence[Series], threshold: float, console: Console) -> list[Series]:
    """Print the series that changed; return those whose newest run carries a regression."""
    failing = [s for s in series if s.regression(threshold) is not None]
    changed = sorted(
        (s for s in series if s.change_points), key=lambda s: s.regression(threshold) is None
    )
    if changed:
        table = Table(title="Change points (Apache Otava, e-divisive)")
        for name in ("configuration", "metric", "runs", "change at", "means", "state"):
            table.add_column(name)
        for one in changed:
            for cp in one.change_points:
                state = (
                    "[bold red]regression[/bold red]"
                    if cp is one.regression(threshold)
                    else "worse" if one.worse(cp) else "better"
                )  # fmt: skip
                table.add_row(
                    f"{one.campaign} · {one.label}",
                    one.metric,
                    str(len(one.points)),
                    f"run {cp.index + 1} ({cp.run_id})",
                    f"{cp.mean_before:.4g} → {cp.mean_after:.4g} ({cp.change:+.1%})",
                    state,
                )
        console.print(table)
    verdict = (
        f"[bold red]REGRESSION[/bold red] · {len(failing)} of {len(series)} series"
        if failing
        else f"no regression · {len(series)} series, {len(changed)} with change points"
    )
    console.print(verdict)
    return failing


def document(series: Sequence[Series], threshold: float) -> dict[str, Any]:
    """The series, their change points and states (``--json FILE``)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "testbed.history",
        "threshold": threshold,
        "series": [
            {
                "campaign": s.campaign,
                "config": s.config,
                "treatment": s.label,
                "metric": s.metric,
                "runs": [_run(p) for p in s.points],
                "change_points": [
                    {
                        "run": cp.index + 1,
                        "run_id": cp.run_id,
                        "mean_before": cp.mean_before,
                        "mean_after": cp.mean_after,
                        "change": cp.change,
                        "pvalue": cp.pvalue,
                        "worse": s.worse(cp),
                    }
                    for cp in s.change_points
                ],
                "regression": s.regression(threshold) is not None,
            }
            for s in series
        ],
    }


def _run(point: RunPoint) -> dict[str, Any]:
    out: dict[str, Any] = {"run_id": point.run_id, "started": point.started, "value": point.value}
    return out | {k: v for k, v in (("label", point.label), ("commit", point.commit)) if v}
