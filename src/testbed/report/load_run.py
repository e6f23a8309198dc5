"""A ``testbed load --out DIR`` folder read as a run of one treatment.

An ad-hoc load test writes ``records.jsonl`` and ``summary.json`` (the load probe's summary
with its verdict) straight into its folder: no ``run.json``, no plan. It is a treatment
whose run is the folder itself, so ``testbed report DIR`` and ``testbed compare`` take it:

- the run document (:func:`load_document`) has one treatment row, directory ``.``, probe
  ``load``, deployment the URL, params what the command's flags set (its load settings)
  — the same row a campaign's load treatment has, so the report, JUnit, the results index
  and ``testbed history`` treat it alike;
- its machine and testbed version are the ones ``testbed load`` recorded (``run`` in its
  summary); a folder written before they were recorded has none (absent, not guessed);
- there is no campaign, hence no campaign hash: two load folders are paired as two
  treatments are, whatever their flags.

Its own ``summary.json`` stays as ``testbed load`` wrote it: the report does not write a
run summary over it.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from testbed import __version__
from testbed.core.clock import wall_label
from testbed.core.ids import short_hash
from testbed.results.files import read_object
from testbed.results.index import params_key
from testbed.results.run_summary import RunSummary, Server, TreatmentRow
from testbed.results.rundir import RECORDS, RUN_FILE, SUMMARY
from testbed.results.summaries import summary_metrics

#: The ``kind`` of what ``testbed load`` records about itself in its summary's ``run``.
LOAD_KIND = "testbed.load"
#: The directory of a load folder's one treatment, relative to the folder.
HERE = "."


def is_load_folder(path: Path) -> bool:
    """A folder ``testbed load`` wrote: its records and a load summary with a verdict, and
    no run of a campaign around them."""
    if (path / RUN_FILE).exists() or not (path / RECORDS).is_file():
        return False
    summary = read_object(path / SUMMARY)
    return isinstance(summary.get("verdict"), dict) and "profile" in summary


def load_params(summary: dict[str, Any]) -> dict[str, Any]:
    """What the command's flags set: recorded by ``testbed load``; for an older folder, the
    profile and load levels its summary states."""
    recorded = (summary.get("run") or {}).get("params")
    if isinstance(recorded, dict):
        return recorded
    params = {"profile": summary.get("profile"), "load": summary.get("load")}
    return {k: v for k, v in params.items() if v is not None}


def load_document(path: Path) -> RunSummary:
    """The run document (the shape of ``run_summary.run_document``) of a load folder."""
    summary = read_object(path / SUMMARY)
    recorded = summary.get("run")
    run: dict[str, Any] = recorded if isinstance(recorded, dict) else {}
    target = str((summary.get("setup") or {}).get("url") or "target")
    params = load_params(summary)
    verdict = summary["verdict"]
    row = TreatmentRow(
        id=short_hash({"url": target, "params": params}),
        dir=HERE,
        slug="load",
        probe="load",
        workers=["target"],
        deployments=[target],
        params=params,
        params_key=params_key("load", [target], params),
        status=verdict["status"],
        reason=verdict.get("reason", ""),
        evidence=verdict.get("evidence", {}),
        attempt=1,
        started=run.get("started"),
        duration_s=run.get("duration_s"),
        records=(summary.get("requests") or {}).get("total"),
        worker_info=[],
        metrics=summary_metrics(summary),
    )
    meta = {
        "run_id": path.resolve().name,
        "kind": LOAD_KIND,
        "campaign": "load",
        "started": run.get("started"),
        "testbed_version": run.get("testbed_version"),
    }
    return RunSummary(
        generated=wall_label(),
        run=meta,
        testbed_version=run.get("testbed_version") or __version__,
        campaign="load",
        campaign_hash=None,
        machine=run.get("machine") if isinstance(run.get("machine"), dict) else {},
        servers=[Server(worker="target", deployment=target, server="external")],
        status=verdict["status"],
        counts=dict(Counter([verdict["status"]])),
        treatments=[row],
        criteria=[],
        steps=[],
    )


def run_section(config: dict[str, Any], started: str, duration_s: float) -> dict[str, Any]:
    """What ``testbed load`` writes about itself in its summary (``run``): what the flags
    set, when, how long, on which machine, by which testbed."""
    from testbed.results.machine import machine_info

    return {
        "kind": LOAD_KIND,
        "params": config,
        "started": started,
        "duration_s": round(duration_s, 3),
        "testbed_version": __version__,
        "machine": machine_info(),
    }
