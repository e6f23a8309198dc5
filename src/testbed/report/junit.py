"""JUnit XML of a run, for CI systems: one test case per treatment, one suite per probe, and
a ``criteria`` suite with one case per comparison of the campaign's criteria.

PASS is a passing case; FAIL a ``<failure>``; ERROR and a treatment that never ran an
``<error>``; SKIPPED a ``<skipped>``. JUnit has no "inconclusive": an INCONCLUSIVE
treatment is a ``<skipped>`` whose message starts with INCONCLUSIVE (like the run's exit
code, it does not fail the job, and it stays visible). The evidence goes in the body of a
failure and the headline metrics in ``<system-out>``.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from testbed.core.secrets import redact
from testbed.report.correctness_view import junit_cases
from testbed.results.files import read_records
from testbed.results.run_summary import RunSummary, TreatmentRow
from testbed.results.rundir import RECORDS
from testbed.results.verdict import Status

#: Characters XML 1.0 cannot carry even escaped.
_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _text(value: Any) -> str:
    return _INVALID.sub("?", redact(str(value)))


def _testcase(suite: ET.Element, classname: str, name: str, seconds: Any) -> ET.Element:
    """A ``<testcase>`` of ``suite``: a treatment named by its folder (a step by its),
    timed by its ``duration_s``."""
    return ET.SubElement(
        suite,
        "testcase",
        classname=_text(classname),
        name=_text(name),
        time=f"{float(seconds or 0.0):.3f}",
    )


def _close(suite: ET.Element, counts: Mapping[str, int], totals: dict[str, int]) -> None:
    """Write a suite's counts on it and add them to the run's totals."""
    for key, value in counts.items():
        suite.set(key, str(value))
        totals[key] += value


def render(document: RunSummary, run_dir: Path | None = None) -> str:
    """The junit.xml text of a run document. With ``run_dir``, each correctness treatment
    also gets a suite with one test case per case result, so CI lists cases."""
    run = document.run
    suites = ET.Element(
        "testsuites", name=_text(document.campaign or run.get("campaign") or "testbed")
    )
    by_probe: dict[str, list[TreatmentRow]] = {}
    for row in document.treatments:
        by_probe.setdefault(row.probe, []).append(row)
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    total_time = 0.0
    facts = {  # each suite's properties: run.json's word first
        "run_id": run.get("run_id"),
        "campaign_hash": run.get("campaign_hash") or document.campaign_hash,
        "testbed_version": run.get("testbed_version") or document.testbed_version,
    }
    for probe, rows in by_probe.items():
        suite = ET.SubElement(suites, "testsuite", name=_text(f"{run.get('campaign')}.{probe}"))
        properties = ET.SubElement(suite, "properties")
        for key, value in facts.items():
            ET.SubElement(properties, "property", name=key, value=_text(value or ""))
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        seconds = 0.0
        for row in rows:
            counts["tests"] += 1
            kind = _case(suite, row, str(run.get("campaign")))
            if kind:
                counts[kind] += 1
            seconds += float(row.duration_s or 0.0)
        _close(suite, counts, totals)
        suite.set("time", f"{seconds:.3f}")
        total_time += seconds
    if run_dir is not None:
        _case_suites(suites, document, run_dir, totals)
    _criteria_suite(suites, document, totals)
    total_time += _steps_suite(suites, document, totals)
    for key, value in totals.items():
        suites.set(key, str(value))
    suites.set("time", f"{total_time:.3f}")
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode")


def _steps_suite(suites: ET.Element, document: RunSummary, totals: dict[str, int]) -> float:
    """The user's steps as a suite: ok passes, a failure that stopped the run is an
    ``<error>`` with its last lines, anything else (tolerated, not run) is ``<skipped>``."""
    from testbed.results.steps import OK, blocking

    steps = document.steps
    if not steps:
        return 0.0
    campaign = str(document.run.get("campaign"))
    suite = ET.SubElement(suites, "testsuite", name=_text(f"{campaign}.steps"))
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    seconds = 0.0
    for row in steps:
        counts["tests"] += 1
        seconds += float(row.get("duration_s") or 0.0)
        case = _testcase(
            suite, f"{campaign}.steps.{row['phase']}", row["dir"], row.get("duration_s")
        )
        status = str(row.get("status"))
        if status == OK:
            continue
        why = row.get("message") or (
            f"exit {row['exit_code']}" if row.get("exit_code") is not None else status
        )
        if blocking(row):
            counts["errors"] += 1
            error = ET.SubElement(case, "error", message=_text(f"{status}: {why}"))
            error.text = _text("\n".join(row.get("tail") or []))
        else:
            counts["skipped"] += 1
            never = status in ("not run", "skipped")
            message = status if never else f"{status} (on_error: continue): {why}"
            ET.SubElement(case, "skipped", message=_text(message))
    _close(suite, counts, totals)
    suite.set("time", f"{seconds:.3f}")
    return seconds


def _case(suite: ET.Element, row: TreatmentRow, campaign: str) -> str | None:
    """Add one test case; return the counter it increments (None for a pass)."""
    deployments = "+".join(row.deployments)
    case = _testcase(suite, f"{campaign}.{row.probe}.{deployments}", row.dir, row.duration_s)
    if row.source:  # an assembled run: the folder (task) the treatment came from
        properties = ET.SubElement(case, "properties")
        ET.SubElement(properties, "property", name="source", value=_text(row.source))
    status, reason = row.status, _text(row.reason)
    first = reason.splitlines()[0][:500] if reason else status
    body = reason + "\n\nevidence:\n" + _text(json.dumps(row.evidence, indent=2))
    kind: str | None = None
    if status == Status.FAIL:
        ET.SubElement(case, "failure", message=first, type=status).text = body
        kind = "failures"
    elif status in (Status.ERROR, Status.NOT_RUN):
        ET.SubElement(case, "error", message=first, type=status).text = body
        kind = "errors"
    elif status in (Status.SKIPPED, Status.INCONCLUSIVE):
        message = first if status == Status.SKIPPED else f"INCONCLUSIVE: {first}"
        ET.SubElement(case, "skipped", message=message)
        kind = "skipped"
    metrics = row.metrics
    if metrics:
        lines = [f"{name} = {value:g}" for name, value in sorted(metrics.items())]
        ET.SubElement(case, "system-out").text = _text("\n".join(lines))
    return kind


def _criteria_suite(suites: ET.Element, document: RunSummary, totals: dict[str, int]) -> None:
    """One test case per comparison of the campaign's criteria (report.criteria)."""
    criteria = document.criteria
    if not criteria:
        return
    campaign = str(document.run.get("campaign"))
    suite = ET.SubElement(suites, "testsuite", name=_text(f"{campaign}.criteria"))
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for criterion in criteria:
        for comparison in criterion["comparisons"]:
            # a comparison is a test case as a treatment is: its row, without a folder
            row = TreatmentRow(
                id="",
                probe="criteria",
                deployments=[criterion["name"]],
                dir=f"{criterion['metric']}: {comparison.get('candidate', '?')}"
                f" vs {comparison.get('baseline', '?')}",
                params={},
                params_key="",
                status=comparison["status"],
                reason=comparison.get("reason", ""),
                evidence=comparison,
            )
            counts["tests"] += 1
            kind = _case(suite, row, campaign)
            if kind:
                counts[kind] += 1
    _close(suite, counts, totals)


def _case_suites(
    suites: ET.Element, document: RunSummary, run_dir: Path, totals: dict[str, int]
) -> None:
    campaign = str(document.run.get("campaign"))
    for row in document.treatments:
        if row.probe != "correctness":
            continue
        records = read_records(run_dir / row.dir / RECORDS)
        if not records:
            continue
        suite = ET.SubElement(suites, "testsuite", name=_text(f"{campaign}.cases.{row.dir}"))
        counts = junit_cases(suite, records, _text(f"{campaign}.{row.dir}"))
        _close(suite, counts, totals)
