"""The end of a run: everything published from a run directory, and the exit code.

:func:`finish_run` (after ``testbed run``) and ``testbed report DIR`` both call
:func:`publish`, which rebuilds from the files of the run directory alone:

- ``summary.json`` — the versioned run summary (:class:`testbed.results.run_summary.RunSummary`,
  :data:`~testbed.results.rundir.RUN_SUMMARY_VERSION`): run metadata
  (testbed version, campaign hash, machine, servers with versions and flags), the run
  status, and one row per treatment with its verdict, evidence and metrics;
- ``junit.xml`` — one test case per treatment, for CI;
- ``report.html`` — the self-contained report;
- a record of the run in the results index (SQLite beside the runs, or a URL);
- an upload of the whole directory to S3 when asked — last, so that it carries the rest.

A broken index or a failed plot is a warning: results on disk are never lost for it.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from testbed import __version__
from testbed.core.clock import wall_label
from testbed.core.errors import EXIT_NOTHING_TESTED, EXIT_OK, InputError, TestbedError
from testbed.core.secrets import redact
from testbed.report import history_view, run_history
from testbed.report.console import print_summary
from testbed.report.details import print_details
from testbed.report.load_run import is_load_folder, load_document
from testbed.results.files import write_atomic, write_json
from testbed.results.index import ResultsIndex, RunEntry, params_key, resolve_url
from testbed.results.machine import machine_info
from testbed.results.run_summary import (
    RunSummary,
    Server,
    Skipped,
    TreatmentRow,
    read_run_summary,
)
from testbed.results.rundir import PLAN, RESOLVED, SUMMARY, RunDir, read_summary
from testbed.results.s3 import upload_run
from testbed.results.steps import blocking, step_rows, step_statuses
from testbed.results.summaries import summary_metrics
from testbed.results.tables import write_tables
from testbed.results.verdict import Status, exit_code, worst

JUNIT = "junit.xml"
HTML = "report.html"


@dataclass
class PublishOptions:
    """Where the published results go; None means the campaign's setting, then the default."""

    index_url: str | None = None
    use_index: bool = True
    upload: str | None = None
    s3_endpoint_url: str | None = None
    html_path: Path | None = None
    fail_on: frozenset[Status] = frozenset()  # statuses that also exit 1 (--fail-on)


def finish_run(
    run_dir: RunDir,
    console: Console,
    upload: str | None = None,
    *,
    index_url: str | None = None,
    s3_endpoint_url: str | None = None,
    fail_on: frozenset[Status] = frozenset(),
) -> int:
    """Publish the run and return the exit code of its status
    (:func:`testbed.results.verdict.exit_code`; 3 also when the upload failed)."""
    return publish(
        run_dir.path,
        console,
        PublishOptions(
            index_url=index_url, upload=upload, s3_endpoint_url=s3_endpoint_url, fail_on=fail_on
        ),
    )


def publish(path: Path, console: Console, options: PublishOptions) -> int:
    """Write summary.json, junit.xml and report.html, record the run, upload; exit code."""
    from testbed.report.html import render as render_html
    from testbed.report.junit import render as render_junit

    document = document_of(path)  # a run directory, or a `testbed load --out` folder
    settings = campaign_results(path)
    changed = (  # this run against the index's earlier runs of its configurations
        run_history.changes(
            document, run_history.index_url(path, options.index_url, settings.get("index")),
            console,
        )
        if options.use_index
        else []
    )  # fmt: skip
    if changed:
        document.history = history_view.document(changed, run_history.THRESHOLD)
    if not is_load_folder(path):  # whose summary.json is the load's own: kept
        write_json(path / SUMMARY, document.to_json())
    write_atomic(path / JUNIT, render_junit(document, path))
    write_tables(path, document.treatments)  # records.csv, summary.csv beside the JSON
    html_path = options.html_path or path / HTML
    try:
        write_atomic(html_path, render_html(path, document, history=changed))
    except Exception as exc:  # a report that cannot be drawn must not hide the verdicts
        console.print(f"[yellow]warning:[/yellow] report.html not written: {exc!r}")
    summaries = {row.dir: read_summary(path / row.dir) for row in document.treatments}
    print_summary(
        document,
        console,
        details=lambda: print_details(path, document.treatments, summaries, console),
    )
    run_history.print_changes(changed, str(document.run["run_id"]), console)
    console.print(f"report: {html_path}  ·  junit: {path / JUNIT}")
    if options.use_index:
        _index_run(path, document, options.index_url or settings.get("index"), console)
    code = outcome_code(document, options.fail_on)
    if code == EXIT_NOTHING_TESTED:
        console.print(f"[bold red]{nothing_tested_reason(document)}[/bold red] (exit 5)")
    target = options.upload or settings.get("upload")
    if target:
        endpoint = options.s3_endpoint_url or settings.get("s3_endpoint_url")
        try:
            done = upload_run(path, str(target), endpoint)
        except TestbedError as exc:
            console.print(f"[red]upload failed:[/red] {redact(str(exc))}")
            return code if code != EXIT_OK else exc.exit_code
        console.print(f"uploaded {done.files} files ({done.bytes / 1e6:.1f} MB) to {done.url}")
    return code


def campaign_results(path: Path) -> dict[str, Any]:
    """The resolved campaign's ``results:`` section (index URL, upload target)."""
    try:
        document = yaml.safe_load((path / RESOLVED).read_text()) or {}
    except (OSError, yaml.YAMLError):
        return {}
    section = document.get("results") if isinstance(document, dict) else None
    return dict(section) if isinstance(section, dict) else {}


def _index_run(path: Path, document: RunSummary, url: str | None, console: Console) -> None:
    chosen = resolve_url(None, url, path.parent)
    try:
        with ResultsIndex(chosen) as index:
            index.add_run(RunEntry.of(document))
    except TestbedError as exc:
        console.print(f"[yellow]warning:[/yellow] run not recorded in the index: {exc}")


# -- the run document -------------------------------------------------------------------------


def document_of(path: Path) -> RunSummary:
    """The run document of a run directory, or of a ``testbed load --out`` folder."""
    if is_load_folder(path):
        return load_document(path)
    return run_document(RunDir.existing(path))


def run_document(run_dir: RunDir) -> RunSummary:
    """The run summary (summary.json) from the run directory's files."""
    from testbed.report.criteria import judge_all

    meta = run_dir.metadata()
    rows = treatment_rows(run_dir.path)
    # a criterion compares treatments of the whole plan: a slice of it (`testbed worker`)
    # leaves it to the report over every slice's folder (report/assemble.py)
    criteria = judge_all(run_dir.path, rows) if meta.get("only") is None else []
    steps = step_rows(run_dir.path)
    stopped = next((s for s in steps if blocking(s)), None)
    origins = meta.get("treatment_sources")
    for row in rows:
        if isinstance(origins, dict):  # an assembled run (report/assemble.py): provenance
            row.source = origins.get(row.dir)
            if row.source is None and row.status == Status.NOT_RUN.value:
                row.reason = "not run: no run folder holds it"
        # a treatment a failed step kept from running says so
        if stopped is not None and row.status == Status.NOT_RUN.value and not row.started:
            row.reason = f"not run: step {stopped['dir']} failed ({stopped['status']})"
    status = worst([run_status(rows), *(c["status"] for c in criteria), *step_statuses(steps)])
    tested = not nothing_tested(rows)
    if all(row.status == Status.SKIPPED.value for row in rows) and status is Status.PASS:
        status = Status.SKIPPED  # steps or criteria that ran fine test nothing of the product
    return RunSummary(
        generated=wall_label(),
        run=meta,
        testbed_version=meta.get("testbed_version", __version__),
        campaign=meta.get("campaign"),
        campaign_hash=meta.get("campaign_hash"),
        machine=_machine(run_dir, meta),
        servers=servers(rows),
        status=status.value,
        counts=dict(Counter(row.status for row in rows)),
        skipped=skipped_counts(rows),
        tested=tested,
        treatments=rows,
        criteria=criteria,
        steps=steps,
    )


def _machine(run_dir: RunDir, meta: dict[str, Any]) -> dict[str, Any]:
    """The machine the run ran on: from run.json, else from an earlier summary (a report
    re-rendered elsewhere keeps the original machine), else this one."""
    if isinstance(meta.get("machine"), dict):
        return dict(meta["machine"])
    if (run_dir.path / SUMMARY).is_file():
        try:
            earlier = read_run_summary(run_dir.path / SUMMARY)
        except InputError:  # damaged, or of another version: this machine, as for none
            return machine_info()
        if earlier.machine:
            return dict(earlier.machine)
    return machine_info()


def servers(rows: list[TreatmentRow]) -> list[Server]:
    """Each worker's server kind, version and command line, from the treatment summaries."""
    seen: dict[str, dict[str, Any]] = {}
    for row in rows:
        for worker in row.worker_info:
            entry = seen.setdefault(worker["id"], {"worker": worker["id"]})
            for key in ("deployment", "server", "version", "argv"):
                if worker.get(key) is not None:
                    entry[key] = worker[key]
    return [Server.model_validate(entry) for entry in seen.values()]


def nothing_tested(rows: list[TreatmentRow]) -> bool:
    """Whether no treatment ran anything: every one SKIPPED, or one whose load sent no
    request (``requests.total`` 0), or none planned at all."""
    return not any(
        row.status != Status.SKIPPED.value and row.metrics.get("requests.total") != 0
        for row in rows
    )


def skipped_counts(rows: list[TreatmentRow]) -> Skipped:
    """What was skipped: whole treatments, and the cases skipped inside the others (a
    correctness treatment's ``cases.skipped``; a skipped treatment's are in its count)."""
    cases = 0
    for row in rows:
        counted = row.evidence.get("cases")
        if row.status != Status.SKIPPED.value and isinstance(counted, dict):
            cases += int(counted.get("skipped") or 0)
    treatments = sum(1 for row in rows if row.status == Status.SKIPPED.value)
    return Skipped(treatments=treatments, cases=cases)


def outcome_code(document: RunSummary, fail_on: frozenset[Status]) -> int:
    """The exit code of a run document (:func:`testbed.results.verdict.exit_code`)."""
    partly = bool(document.skipped.treatments or document.skipped.cases)
    return exit_code(document.status, fail_on, tested=document.tested, partly_skipped=partly)


def nothing_tested_reason(document: RunSummary) -> str:
    """Why a run tested nothing, for the line printed beside its exit code 5."""
    rows = document.treatments
    if not rows:
        return "nothing was tested: the plan has no treatment"
    first = rows[0]
    if any(row.status != Status.SKIPPED.value for row in rows):
        return f"nothing was tested: no case ran and no request was sent; first: {first.dir}"
    return (
        f"nothing was tested: all {len(rows)} treatment(s) were skipped; first:"
        f" {first.dir}: {first.reason or 'no reason given'}"
    )


def run_status(rows: list[TreatmentRow]) -> Status:
    """The run's status: the most severe of its treatments' (:data:`SEVERITY` order)."""
    return worst(row.status for row in rows)


def treatment_rows(run_dir: Path) -> list[TreatmentRow]:
    """One row per treatment from the plan and each treatment's summary file."""
    plan = json.loads((run_dir / PLAN).read_text())
    deployments = {w["id"]: w["deployment"] for w in plan.get("workers", [])}
    rows = []
    for t in plan["treatments"]:
        summary = read_summary(run_dir / t["dir"])
        verdict = summary.get("verdict") or (
            {"status": Status.SKIPPED.value, "reason": t["reason"]}
            if t["status"] == "skipped"
            else {"status": Status.NOT_RUN.value, "reason": "the run ended before it"}
        )
        names = [deployments.get(w, w) for w in t["workers"]]
        rows.append(
            TreatmentRow(
                id=t["id"],
                dir=t["dir"],
                slug=t.get("slug", ""),
                probe=t["probe"],
                workers=t["workers"],
                deployments=names,
                params=t["params"],
                params_key=params_key(t["probe"], names, t["params"]),
                status=verdict["status"],
                reason=verdict.get("reason", ""),
                evidence=verdict.get("evidence", {}),
                attempt=summary.get("attempt"),
                started=summary.get("started"),
                duration_s=summary.get("duration_s"),
                records=summary.get("records"),
                worker_info=summary.get("workers", []),
                metrics=summary_metrics(summary),
            )
        )
    return rows
