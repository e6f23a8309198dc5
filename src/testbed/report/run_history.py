"""A published run against its history: the change points of its configurations.

When the results index holds earlier runs of the same configurations (the same campaign and
``params_key``: :mod:`testbed.results.history`), ``testbed run`` and ``testbed report`` put
this run's metrics at the end of each series — in place of what the index held for this run
id, so a re-rendered report does not count itself twice — and look for change points with
the method and settings of ``testbed history`` (Apache Otava's e-divisive; 5 % of the
segments' means, p below 0.001). Each one found is named on the terminal, this run's own
first (the newest run carries a regression beyond the threshold), and drawn in report.html's
History section with the runs, labels and commits on either side; ``summary.json`` keeps them
under ``history``.

No index file, or fewer than three runs of a configuration: no history, nothing said. A
broken index or a missing Otava is a warning: the run's own results never wait on history.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from testbed.core.errors import TestbedError
from testbed.results.history import RunPoint, Series, find_change_points, gather, provenance_of
from testbed.results.index import ResultsIndex, resolve_url
from testbed.results.run_summary import RunSummary
from testbed.results.summaries import NEUTRAL, direction

#: ``testbed history``'s defaults: a change smaller than this is no regression; significance.
THRESHOLD = 0.05
MAX_PVALUE = 0.001
#: Lines printed at most (the page of ``testbed history`` has them all).
MAX_LINES = 8


def index_url(path: Path, flag: str | None, configured: str | None) -> str | None:
    """The index a run is recorded in, when it exists (None: no history to read)."""
    url = resolve_url(flag, configured, path.parent)
    default = (path.parent / "index.sqlite").resolve()
    if url == f"sqlite:///{default}" and not default.is_file():
        return None
    return url


def series_of(document: RunSummary, index: ResultsIndex) -> list[Series]:
    """Each series of the index this run belongs to, with this run as its newest point."""
    run = document.run
    run_id = str(run["run_id"])
    rows = {row.params_key: row for row in document.treatments if row.metrics}
    label, commit = provenance_of(run)
    out = []
    for series in gather(index, document.campaign or ""):
        row = rows.get(series.config)
        value = row.metrics.get(series.metric) if row is not None else None
        if row is None or value is None or direction(series.metric) == NEUTRAL:
            continue
        point = RunPoint(
            run_id,
            str(run.get("started") or ""),
            float(value),
            document.testbed_version or "",
            label=label,
            commit=commit,
        )
        # in its place when the index holds it (a re-rendered report), else the newest
        held = [i for i, p in enumerate(series.points) if p.run_id == run_id]
        if held:
            series.points[held[0]] = point
        else:
            series.points.append(point)
        series.label = row.dir
        out.append(series)
    return out


def changes(document: RunSummary, url: str | None, console: Console) -> list[Series]:
    """The series of this run's configurations that have change points (see the module
    docstring); their problems are warnings."""
    if url is None:
        return []
    try:
        with ResultsIndex(url) as index:
            series = series_of(document, index)
        for one in series:
            find_change_points(one, MAX_PVALUE)
    except TestbedError as exc:  # a broken index, Otava not installed
        console.print(f"[yellow]warning:[/yellow] history not read: {exc}")
        return []
    changed = [s for s in series if s.change_points]
    return sorted(changed, key=lambda s: (s.regression(THRESHOLD) is None, s.label, s.metric))


def print_changes(changed: Sequence[Series], run_id: str, console: Console) -> None:
    """One line per change point (this run's regressions first), at most :data:`MAX_LINES`."""
    lines = []
    for one in changed:
        newest = one.points[-1].run_id == run_id
        carried = one.regression(THRESHOLD) if newest else None
        for cp in one.change_points:
            before, after = one.points[cp.index - 1], one.points[cp.index]
            mark = (
                " [bold red]— this run carries it[/bold red]"
                if cp is carried
                else ""
            )  # fmt: skip
            lines.append(
                f"  {one.label} {one.metric}: {cp.change:+.1%} at run {cp.index + 1} of"
                f" {len(one.points)}, between {_named(before)} and {_named(after)}{mark}"
            )
    if not lines:
        return
    console.print(f"history: {len(lines)} change point(s) in this run's configurations")
    for line in lines[:MAX_LINES]:
        console.print(line)
    if len(lines) > MAX_LINES:
        console.print(f"  … {len(lines) - MAX_LINES} more: testbed history")


def _named(point: RunPoint) -> str:
    extra = ", ".join(v for v in (point.label, point.commit and f"commit {point.commit[:12]}") if v)
    return f"{point.run_id} ({extra})" if extra else point.run_id
