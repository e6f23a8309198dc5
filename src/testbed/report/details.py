"""What the terminal shows below the verdict table: the evidence behind each verdict.

For an A/B treatment its criteria and latency tables; for a correctness treatment that
failed, a diff of each failed case with its first divergent token highlighted; for a
correctness campaign with a ``reference``, each configuration's differential; for a load or
A/B treatment, server and client token counts that differ beyond the threshold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from testbed.report.ab_table import render_ab
from testbed.report.correctness_view import differential_table, failure_diff
from testbed.report.server_metrics_view import terminal_lines
from testbed.results.run_summary import TreatmentRow

#: Failed cases shown per treatment; the rest are in report.html and junit.xml.
MAX_DIFFS = 5


def print_details(
    run_dir: Path,
    rows: Sequence[TreatmentRow],
    summaries: Mapping[str, Mapping[str, Any]],
    console: Console,
) -> None:
    """Evidence per treatment, then the differentials of the run."""
    for row in rows:
        summary = summaries.get(row.dir) or {}
        if row.probe == "ab" and summary.get("ab"):
            render_ab(summary, console)
        elif row.probe == "correctness" and summary.get("failures"):
            failures = summary["failures"]
            console.print(f"[bold]{row.dir}[/bold]: {len(failures)} failed case(s)")
            for failure in failures[:MAX_DIFFS]:
                console.print(failure_diff(failure))
            if len(failures) > MAX_DIFFS:
                console.print(f"… {len(failures) - MAX_DIFFS} more in report.html")
        for line in terminal_lines(row.dir, summary):
            console.print(line)
    _differentials(run_dir, console)


def _differentials(run_dir: Path, console: Console) -> None:
    from testbed.probes.correctness.differential import run_dir_differentials

    try:
        found = run_dir_differentials(run_dir)
    except (OSError, ValueError, KeyError) as exc:
        console.print(f"[yellow]differential not computed:[/yellow] {exc!r}")
        return
    for name, summary in found.items():
        if summary.get("divergences"):
            console.print(differential_table(name, summary))
        else:
            console.print(
                f"{name} vs {summary.get('reference')}: {summary.get('compared', 0)} answers"
                " compared, all identical to the reference"
            )
