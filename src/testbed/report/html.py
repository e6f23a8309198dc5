"""The HTML report: one self-contained file (inline CSS, inline SVG plots, no script, nothing
fetched), readable offline and attachable to a CI job.

Sections: the headline load figures, the verdicts with their evidence, the change points of
the run's configurations in the results index (History), correctness diffs (the first divergence
highlighted), load plots, A/B results, every treatment's summary (known parts as tables,
parts added by newer probes as JSON), the plan, the resolved campaign, the run's metadata.
Every text shown goes through :func:`testbed.core.secrets.redact` and HTML escaping.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from testbed.report import (
    captures_view,
    correctness_html,
    criteria_view,
    headline,
    history_html,
    load_view,
    run_history,
    scale_view,
    steps_view,
)
from testbed.report.badges import badge, skipped_note
from testbed.report.html_blocks import e, kv, params, pre_json, tree
from testbed.report.server_metrics_view import section as server_section
from testbed.results.files import read_records
from testbed.results.history import Series
from testbed.results.run_summary import RunSummary, TreatmentRow
from testbed.results.rundir import PLAN, RECORDS, RESOLVED, read_summary

_LATENCY_KEYS = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")
_STAT_KEYS = ("p50", "p90", "p95", "p99", "p999", "mean", "std", "n")
#: Summary keys shown by dedicated sections or the header of a treatment.
_SHOWN = {"schema_version", "id", "dir", "probe", "params", "attempt", "started", "verdict"}


def render(
    run_path: Path,
    document: RunSummary,
    summaries: Mapping[str, Mapping[str, Any]] | None = None,
    history: Sequence[Series] = (),
) -> str:
    """The whole report of the run in ``run_path`` (``document`` is its run summary; the
    treatments' summaries are read from their folders unless given, as another harness's
    results give them: :mod:`testbed.report.foreign_run`; ``history``: the series of this
    run's configurations with change points, :mod:`testbed.report.run_history`)."""
    rows = document.treatments
    if summaries is None:
        summaries = {row.id: read_summary(run_path / row.dir) for row in rows}
    sections = [
        # the figures a load test is read for first (issue 36), then every verdict
        ("headline", "Load at a glance", headline.section(rows, summaries)),
        ("verdicts", "Verdicts", _verdicts(rows)),
        ("history", "History", history_html.run_section(history, run_history.THRESHOLD)),
        ("steps", "Steps", steps_view.section(document.steps)),
        ("correctness", "Correctness", correctness_html.section(run_path, rows, summaries)),
        ("load", "Load", load_view.section(load_view.gather(run_path, rows, summaries))),
        ("criteria", "Criteria", criteria_view.section(document)),
        ("captures", "Captures", captures_view.section(run_path, rows)),
        ("ab", "A/B", _ab(run_path, rows, summaries)),
        ("scale", "Scale", scale_view.section(run_path, rows, summaries)),
        ("treatments", "Treatments", _treatments(rows, summaries)),
        ("sources", "Run folders", _sources(document)),
        ("plan", "Plan", _plan(run_path)),
        ("campaign", "Resolved campaign", _campaign(run_path)),
        ("run", "Run", _run(document)),
    ]
    present = [(key, title, body) for key, title, body in sections if body]
    css = resources.files("testbed.report").joinpath("report.css").read_text(encoding="utf-8")
    nav = "".join(f'<a href="#{key}">{e(title)}</a>' for key, title, _ in present)
    body = "\n".join(
        f'<section id="{key}"><h2>{e(title)}</h2>\n{content}</section>'
        for key, title, content in present
    )
    run = document.run
    title = f"testbed · {document.campaign} · {run['run_id']}"
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><title>{e(title)}</title>'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<link rel="icon" href="data:,"><style>{css}</style></head>\n<body>'
        f"{_header(document)}<nav>{nav}</nav>\n<main>{body}</main></body></html>\n"
    )


def _header(document: RunSummary) -> str:
    run, machine = document.run, document.machine
    counts = " ".join(f"{badge(s)} {n}" for s, n in sorted(document.counts.items()))
    note = skipped_note(document)
    counts += f' <span class="skipped-note">· {e(note)}</span>' if note else ""
    facts = {
        "started": run.get("started"),
        "testbed": document.testbed_version,
        "campaign hash": document.campaign_hash,
        # another harness's results do not say on which machine: absent, not guessed
        "machine": f"{machine.get('hostname')} · {machine.get('cpu_count')} CPUs"
        f" · {machine.get('cpu_model') or ''} · {machine.get('platform') or ''}"
        if machine
        else None,
        "source": run.get("source"),
        "generated": document.generated,
    }
    return (
        f"<header><h1>{e(document.campaign)} · {e(run['run_id'])}"
        f" {badge(document.status)}</h1><div>{counts}</div>{kv(facts)}</header>"
    )


def _verdicts(rows: Sequence[TreatmentRow]) -> str:
    lines = [
        "<table><tr><th>#</th><th>treatment</th><th>probe</th><th>deployments</th>"
        "<th>params</th><th>verdict</th><th>reason and evidence</th></tr>"
    ]
    for number, row in enumerate(rows, start=1):
        evidence = row.evidence
        details = (
            f"<details><summary>evidence</summary>{pre_json(evidence)}</details>"
            if evidence
            else ""
        )
        lines.append(
            f'<tr><td class="num">{number}</td>'
            f'<td><a href="#t-{e(row.id)}">{e(row.dir)}</a></td><td>{e(row.probe)}</td>'
            f"<td>{e(', '.join(row.deployments))}</td>"
            f"<td>{params(row.params)}</td>"
            f"<td>{badge(row.status)}</td><td>{e(row.reason)}{details}"
            f"{_source(row)}</td></tr>"
        )
    lines.append("</table>")
    return "\n".join(lines)


# -- A/B, treatments, plan, campaign, run -------------------------------------------------------


def _ab(run_path: Path, rows: Sequence[TreatmentRow], summaries: Mapping[str, Any]) -> str:
    parts = []
    for number, row in enumerate(rows):
        if row.probe != "ab":
            continue
        summary = summaries.get(row.id) or {}
        parts.append(f"<h3>{e(row.dir)} {badge(row.status)}</h3><p>{e(row.reason)}</p>")
        parts.append(tree(row.evidence) if row.evidence else "")
        records = read_records(run_path / row.dir / RECORDS)
        parts.append(server_section(run_path / row.dir, summary, records, f"ab-sm{number}"))
        rest = {k: v for k, v in summary.items() if k not in _SHOWN and k != "workers"}
        if rest:
            parts.append(f"<details><summary>summary</summary>{tree(rest)}</details>")
    return "\n".join(parts)


def latency_table(summary: Mapping[str, Any]) -> str:
    present = [k for k in _LATENCY_KEYS if isinstance(summary.get(k), Mapping)]
    if not present:
        return ""
    head = "".join(f"<th>{k}</th>" for k in _STAT_KEYS)
    lines = [f"<table><tr><th>ms</th>{head}</tr>"]
    for key in present:
        stats = summary[key]
        cells = "".join(
            f'<td class="num">{"–" if stats.get(s) is None else e(f"{stats[s]:.4g}")}</td>'
            for s in _STAT_KEYS
        )
        lines.append(f"<tr><th>{e(key)}</th>{cells}</tr>")
    return "".join(lines) + "</table>"


def _treatments(rows: Sequence[TreatmentRow], summaries: Mapping[str, Any]) -> str:
    parts = []
    for row in rows:
        summary = summaries.get(row.id) or {}
        facts = {
            "probe": row.probe,
            "deployments": ", ".join(row.deployments),
            "attempt": row.attempt,
            "started": row.started,
            "duration": f"{row.duration_s} s" if row.duration_s is not None else None,
            "records": row.records,
        }
        known = latency_table(summary)
        rest = {
            k: v
            for k, v in summary.items()
            if k not in _SHOWN and k not in _LATENCY_KEYS and k != "stages"
        }
        stages = summary.get("stages")
        stage_html = (
            "".join(f"<h4>stage {e(s.get('stage'))}</h4>{latency_table(s)}" for s in stages)
            if isinstance(stages, list)
            else ""
        )
        parts.append(
            f'<details id="t-{e(row.id)}"><summary>{e(row.dir)} {badge(row.status)}'
            f"</summary>{kv(facts)}{params(row.params)}{known}{stage_html}"
            f"{tree(rest) if rest else ''}</details>"
        )
    return "\n".join(parts)


def _plan(run_path: Path) -> str:
    try:
        plan = json.loads((run_path / PLAN).read_text())
    except (OSError, ValueError):
        return ""
    workers = "".join(
        f"<tr><td>{e(w['id'])}</td><td>{e(w['deployment'])}</td><td>{e(w['server'])}</td>"
        f"<td>{params(w.get('settings') or {})}</td></tr>"
        for w in plan.get("workers", [])
    )
    treatments = "".join(
        f'<tr><td class="num">{t["index"]}</td><td>{e(t["dir"])}</td><td>{e(t["probe"])}</td>'
        f"<td>{e(', '.join(t['workers']))}</td><td>{params(t['params'])}</td>"
        f"<td>{e(t['status'])} {e(t.get('reason') or '')}</td></tr>"
        for t in plan.get("treatments", [])
    )
    notes = "".join(f"<li>{e(n)}</li>" for n in plan.get("notes", []))
    return (
        "<h3>Workers</h3><table><tr><th>id</th><th>deployment</th><th>server</th>"
        f"<th>settings</th></tr>{workers}</table><h3>Treatments</h3><table><tr><th>#</th>"
        "<th>directory</th><th>probe</th><th>workers</th><th>params</th><th>plan status</th>"
        f"</tr>{treatments}</table>" + (f"<ul>{notes}</ul>" if notes else "")
    )


def _campaign(run_path: Path) -> str:
    try:
        text = (run_path / RESOLVED).read_text(encoding="utf-8")
    except OSError:
        return ""
    return f"<pre><code>{e(text)}</code></pre>"


def _source(row: TreatmentRow) -> str:
    """Where an assembled run's treatment came from (``testbed report DIR1 DIR2 …``)."""
    source = row.source
    return f'<div class="source">from <code>{e(source)}</code></div>' if source else ""


def _sources(document: RunSummary) -> str:
    """The run folders an assembled run was made of, one row each."""
    sources = document.run.get("sources") or []
    if not sources:
        return ""
    lines = ["<table><tr><th>folder</th><th>run id</th><th>machine</th><th>treatments</th></tr>"]
    for source in sources:
        host = (source.get("machine") or {}).get("hostname") or ""
        used = "<br>".join(e(d) for d in source.get("used") or []) or "(none used)"
        lines.append(
            f"<tr><td><code>{e(source.get('origin'))}</code></td><td>{e(source.get('run_id'))}"
            f"</td><td>{e(host)}</td><td>{used}</td></tr>"
        )
    lines.append("</table>")
    return "\n".join(lines)


def _run(document: RunSummary) -> str:
    return (
        f"<h3>Machine</h3>{tree(document.machine)}"
        f"<h3>Servers</h3>{pre_json([server.to_json() for server in document.servers])}"
        f"<h3>run.json</h3>{tree(document.run)}"
    )
