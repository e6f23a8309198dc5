"""Another harness's results as a run: ``testbed report FILE`` and a side of ``testbed compare``.

A Benchmark Report, or a guidellm / vLLM benchmark / inference-perf results file converted to
one by the ``llmd-benchmark-report`` package (:mod:`testbed.results.foreign`), becomes a run
document of one treatment per benchmark it holds:

- probe ``load``, no deployment and no machine (the file does not say which; absent, not
  guessed: ``testbed compare`` does not compare setups on what a side does not know);
- status INCONCLUSIVE: a report carries metrics, not a verdict;
- metrics in testbed's names and units, each field read as its tool defines it
  (:func:`testbed.results.benchmark_report.summary_of`);
- params: the tool, the stage, its concurrency or rate — what tells its benchmarks apart.

``testbed report FILE`` renders it (terminal, ``<file>.report.html`` beside it, the
"Load at a glance" table from the report's figures) and writes nothing else beside a file
that is not testbed's; it records it in the results index only when one is named
(``--index`` or ``TESTBED_INDEX_URL``): a folder of downloads is not a runs folder.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from testbed.core.errors import InputError, TestbedError
from testbed.core.ids import short_hash
from testbed.results import benchmark_report
from testbed.results.foreign import ForeignResults, read
from testbed.results.index import ENV_URL, params_key
from testbed.results.run_summary import RunSummary, TreatmentRow
from testbed.results.summaries import NEUTRAL, direction
from testbed.results.verdict import Status

#: The ``kind`` of the run document of another harness's results.
KIND = "llm-d.benchmark-report"
#: The metric families a Benchmark Report carries (:func:`benchmark_report.summary_of`).
_REPORTABLE = ("ttft_ms.", "itl_ms.", "tpot_ms.", "e2e_ms.", "throughput.", "requests.")


@dataclass
class ForeignRun:
    """The run document of a results file, and each treatment's summary-shaped figures."""

    document: RunSummary
    summaries: dict[str, dict[str, Any]]  # by treatment id: what the HTML report shows


def _params(report: Mapping[str, Any]) -> dict[str, Any]:
    standardized = ((report.get("scenario") or {}).get("load") or {}).get("standardized") or {}
    keys = ("tool", "tool_version", "stage", "concurrency", "rate_qps")
    return {k: standardized[k] for k in keys if standardized.get(k) not in (None, "")}


def row_dir(foreign: ForeignResults, index: int) -> str:
    """How a benchmark of the file is named: the file, and ``#N`` when it holds several."""
    several = len(foreign.reports) > 1 or foreign.indices != [0]
    return f"{foreign.name}#{index}" if several else foreign.name


def run_of(foreign: ForeignResults) -> ForeignRun:
    """The run document (the shape of ``run_summary.run_document``) of a results file."""
    rows: list[TreatmentRow] = []
    summaries: dict[str, dict[str, Any]] = {}
    for report, index in zip(foreign.reports, foreign.indices, strict=True):
        params = _params(report)
        row_id = short_hash({"file": foreign.name, "index": index, "params": params})
        rows.append(
            TreatmentRow(
                id=row_id,
                dir=row_dir(foreign, index),
                slug=foreign.kind,
                probe="load",
                workers=[],
                deployments=[],
                params=params,
                params_key=params_key("load", [], params),
                status=Status.INCONCLUSIVE.value,
                reason=f"{foreign.kind} results: metrics without a verdict",
                evidence={},
                started=((report.get("run") or {}).get("time") or {}).get("start"),
                metrics=benchmark_report.metrics_of(report),
            )
        )
        summaries[row_id] = {**benchmark_report.summary_of(report), "stage": str(index)}
    first = foreign.reports[0].get("run") or {}
    document = RunSummary(
        run={
            "run_id": foreign.path.stem,
            "kind": KIND,
            "source": str(foreign.path),
            "started": (first.get("time") or {}).get("start"),
            "notes": foreign.notes,
        },
        campaign=foreign.kind,
        campaign_hash=None,
        machine={},
        servers=[],
        status=Status.INCONCLUSIVE.value,
        counts={Status.INCONCLUSIVE.value: len(rows)},
        treatments=rows,
        criteria=[],
        steps=[],
    )
    return ForeignRun(document, summaries)


def side_document(path: Path, results: ForeignResults) -> RunSummary:
    """The run document of a results file holding one benchmark (``FILE#N`` picks one)."""
    document = run_of(results).document
    if len(document.treatments) > 1:
        listed = ", ".join(
            f"{row.dir} ({', '.join(f'{k} {v}' for k, v in row.params.items())})"
            for row in document.treatments
        )
        raise InputError(
            f"{path} holds {len(document.treatments)} benchmarks: name the one to compare"
            f" as FILE#N — {listed}"
        )
    return document


def warnings(paths: Sequence[Path]) -> list[str]:
    """What a comparison with another harness's results must say: the converter's
    warnings, the caveats of each report (a different client's clock …), once each."""
    out: list[str] = []
    for path in paths:
        results = read(path)
        if results is None:
            continue
        out += [f"{results.name}: {note}" for note in results.notes]
        out += [line for line in benchmark_report.caveats(results.reports[0]) if line not in out]
    return out


def comparable_metrics(base: TreatmentRow, candidate: TreatmentRow) -> list[str]:
    """Which of the figures a Benchmark Report can carry (latencies, rates, requests) the
    two sides share, and which only one side has: one line each, grouped by family
    (``ttft_ms: mean, p50, p99``). testbed's own observations (server metrics, a sweep's
    stages) have no counterpart in a report and are not listed."""
    judged = {
        side: {m for m in row.metrics if m.startswith(_REPORTABLE) and direction(m) != NEUTRAL}
        for side, row in (("base", base), ("candidate", candidate))
    }
    both = judged["base"] & judged["candidate"]
    lines = [f"comparable: {_families(both) or 'nothing (no metric on both sides)'}"]
    for side, other in (("base", "candidate"), ("candidate", "base")):
        alone = judged[side] - judged[other]
        if alone:
            lines.append(f"only in the {side}, not comparable: {_families(alone)}")
    return lines


def _families(names: set[str]) -> str:
    groups: dict[str, list[str]] = {}
    for name in sorted(names):
        head, _, rest = name.rpartition(".")
        groups.setdefault(head or name, []).append(rest if head else "")
    return "; ".join(
        f"{head}: {', '.join(s for s in stats if s)}" if any(stats) else head
        for head, stats in groups.items()
    )


def default_html(foreign: ForeignResults) -> Path:
    """``<file>.report.html`` beside the results file."""
    return foreign.path.with_name(f"{foreign.path.stem}.report.html")


@dataclass
class PublishTo:
    """Where ``testbed report FILE`` writes and records, and what fails it."""

    html_path: Path | None = None
    index_url: str | None = None  # recorded only when named (or TESTBED_INDEX_URL is set)
    use_index: bool = True
    fail_on: frozenset[Status] = frozenset()  # --fail-on inconclusive: exit 1


def publish(foreign: ForeignResults, console: Console, to: PublishTo) -> int:
    """``testbed report FILE``: the terminal summary and the HTML report; the exit code of
    INCONCLUSIVE (0, or 1 with ``--fail-on inconclusive``: there is no verdict)."""
    from testbed.report.console import print_summary
    from testbed.report.html import render
    from testbed.results.files import write_atomic
    from testbed.results.verdict import exit_code

    run = run_of(foreign)
    for note in foreign.notes:
        console.print(f"[dim]converter: {note}[/dim]")
    print_summary(run.document, console)
    target = to.html_path or default_html(foreign)
    write_atomic(target, render(foreign.path, run.document, run.summaries))
    console.print(f"report: {target}")
    url = to.index_url or os.environ.get(ENV_URL)
    if to.use_index and url:
        _index_run(run.document, url, console)
    return exit_code(run.document.status, to.fail_on)


def _index_run(document: RunSummary, url: str, console: Console) -> None:
    from testbed.results.index import ResultsIndex, RunEntry

    try:
        with ResultsIndex(url) as index:
            index.add_run(RunEntry.of(document))
    except TestbedError as exc:
        console.print(f"[yellow]warning:[/yellow] not recorded in the index: {exc}")
