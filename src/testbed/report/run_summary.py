"""The end of a run: the run-level summary file, the final terminal table, the exit code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from testbed.core.errors import EXIT_FAILED, EXIT_INFRA, EXIT_OK
from testbed.report.live import STYLE
from testbed.results.files import write_json
from testbed.results.rundir import SUMMARY, RunDir
from testbed.results.verdict import Status

RUN_SUMMARY_VERSION = 1


def finish_run(run_dir: RunDir, console: Console, upload: str | None = None) -> int:
    """Write the run summary, print the final table, and return the exit code:
    1 if any treatment FAILed, else 3 if any hit an infrastructure ERROR, else 0."""
    rows = treatment_rows(run_dir.path)
    status = run_status(rows)
    write_json(
        run_dir.path / SUMMARY,
        {
            "schema_version": RUN_SUMMARY_VERSION,
            "run": run_dir.metadata(),
            "status": status.value,
            "treatments": rows,
        },
    )
    render_final(rows, status, run_dir.path, console)
    del upload
    if status == Status.FAIL:
        return EXIT_FAILED
    if status == Status.ERROR:
        return EXIT_INFRA
    return EXIT_OK


def run_status(rows: list[dict[str, Any]]) -> Status:
    """The run's status: the most severe of its treatments' (not-run ones count as ERROR)."""
    seen = {row["status"] for row in rows}
    if "NOT RUN" in seen:
        seen.add(Status.ERROR.value)
    for status in (Status.FAIL, Status.ERROR, Status.INCONCLUSIVE, Status.PASS):
        if status.value in seen:
            return status
    return Status.SKIPPED


def treatment_rows(run_dir: Path) -> list[dict[str, Any]]:
    """One row per treatment from the plan, the ledger's verdicts and each summary file."""
    plan = json.loads((run_dir / "plan.json").read_text())
    rows = []
    for t in plan["treatments"]:
        summary_path = run_dir / t["dir"] / SUMMARY
        summary: dict[str, Any] = {}
        if summary_path.is_file():
            summary = json.loads(summary_path.read_text())
        verdict = summary.get("verdict") or (
            {"status": "SKIPPED", "reason": t["reason"]}
            if t["status"] == "skipped"
            else {"status": "NOT RUN", "reason": ""}
        )
        rows.append(
            {
                "id": t["id"],
                "dir": t["dir"],
                "probe": t["probe"],
                "workers": t["workers"],
                "params": t["params"],
                "status": verdict["status"],
                "reason": verdict.get("reason", ""),
            }
        )
    return rows


def render_final(
    rows: list[dict[str, Any]], status: Status, run_dir: Path, console: Console
) -> None:
    """tgis-tester's last screen: every treatment with its verdict, then the outcome."""
    table = Table(title=f"Run {run_dir.name}", title_justify="left")
    for column in ("#", "treatment", "probe", "verdict", "reason"):
        table.add_column(column, overflow="fold")
    for number, row in enumerate(rows, start=1):
        style = STYLE.get(Status(row["status"]), "") if row["status"] in Status.__members__ else ""
        table.add_row(
            str(number),
            row["dir"],
            row["probe"],
            f"[{style}]{row['status']}[/{style}]" if style else row["status"],
            (row["reason"] or "").splitlines()[0][:100] if row["reason"] else "",
        )
    console.print(table)
    style = STYLE.get(status, "")
    console.print(f"[bold {style}]run {status.value}[/bold {style}] · results in {run_dir}")
