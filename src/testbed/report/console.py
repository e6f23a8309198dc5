"""Terminal summary of a run: tgis-tester's last screen (every treatment with its verdict),
the headline load numbers, then the outcome. Reads only the run document of
:mod:`testbed.report.run_summary`, so ``testbed report DIR`` prints the same as the run did."""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console
from rich.table import Table

from testbed.core.secrets import redact
from testbed.report.badges import skipped_note, styled
from testbed.report.live import STYLE
from testbed.results.run_summary import RunSummary
from testbed.results.verdict import Status

#: The headline columns of a load treatment: (header, metric name, format).
LOAD_COLUMNS = (
    ("TTFT50", "ttft_ms.p50", "{:.1f}"),
    ("TTFT99", "ttft_ms.p99", "{:.1f}"),
    ("ITL50", "itl_ms.p50", "{:.2f}"),
    ("ITL99", "itl_ms.p99", "{:.2f}"),
    ("e2e99", "e2e_ms.p99", "{:.0f}"),
    ("req/s", "throughput.requests_per_s", "{:.1f}"),
    ("tok/s", "throughput.output_tokens_per_s", "{:.0f}"),
    ("errors", "requests.errors", "{:.0f}"),
)


def verdict_table(document: RunSummary) -> Table:
    """Every treatment with its verdict and the first line of the reason."""
    table = Table(title=f"Run {document.run['run_id']}", title_justify="left")
    for column in ("#", "treatment", "probe", "verdict", "reason"):
        table.add_column(column, overflow="fold")
    for number, row in enumerate(document.treatments, start=1):
        reason = redact(row.reason).splitlines()
        table.add_row(
            str(number),
            row.dir,
            row.probe,
            styled(row.status),
            reason[0][:100] if reason else "",
        )
    return table


def load_table(document: RunSummary) -> Table | None:
    """Headline numbers of every load treatment that has them (milliseconds, per second)."""
    rows = [
        (number, row)
        for number, row in enumerate(document.treatments, start=1)
        if row.probe == "load" and row.metrics
    ]
    if not rows:
        return None
    table = Table(
        title="Load: latency percentiles in ms (50th, 99th), steady-state window; # as above",
        title_justify="left",
    )
    table.add_column("#", justify="right", no_wrap=True, min_width=2)
    for header, _, _ in LOAD_COLUMNS:
        table.add_column(header, justify="right", no_wrap=True)
    for number, row in rows:
        cells = []
        for _, name, fmt in LOAD_COLUMNS:
            value = row.metrics.get(name)
            cells.append("–" if value is None else fmt.format(value))
        table.add_row(str(number), *cells)
    return table


def print_summary(
    document: RunSummary,
    console: Console,
    details: Callable[[], None] | None = None,
) -> None:
    """The steps, the verdict table, the load table, the evidence (``details``), the
    outcome line."""
    from testbed.report.steps_view import print_steps

    print_steps(document.steps, console)
    console.print(verdict_table(document))
    table = load_table(document)
    if table is not None:
        console.print(table)
    from testbed.report.criteria_view import table as criteria_table

    judged = criteria_table(document)
    if judged is not None:
        console.print(judged)
        for criterion in document.criteria:
            for c in criterion["comparisons"]:
                console.print(f"  {styled(c['status'])} {redact(c.get('reason', ''))}")
    if details is not None:
        details()
    counts = "  ".join(f"{styled(s)} {n}" for s, n in sorted(document.counts.items()))
    status = document.status
    style = STYLE.get(Status(status), "")
    note = skipped_note(document)
    note = f"  [yellow]· {note}[/yellow]" if note else ""
    console.print(f"[bold {style}]run {status}[/bold {style}]  {counts}{note}")
