"""The HTML report: one self-contained file (inline CSS, inline SVG plots, no script, nothing
fetched), readable offline and attachable to a CI job.

Sections: the verdicts with their evidence, correctness diffs (the first divergence
highlighted), load plots, A/B results, every treatment's summary (known parts as tables,
parts added by newer probes as JSON), the plan, the resolved campaign, the run's metadata.
Every text shown goes through :func:`testbed.core.secrets.redact` and HTML escaping.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from html import escape
from importlib import resources
from pathlib import Path
from typing import Any

from testbed.core.secrets import redact
from testbed.report import captures_view, criteria_view, load_view, scale_view, steps_view
from testbed.report.badges import badge
from testbed.report.differential_view import differentials
from testbed.report.server_metrics_view import section as server_section
from testbed.results.files import read_records
from testbed.results.rundir import PLAN, RECORDS, RESOLVED, read_summary

_LATENCY_KEYS = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")
_STAT_KEYS = ("p50", "p90", "p95", "p99", "p999", "mean", "std", "n")
#: Summary keys shown by dedicated sections or the header of a treatment.
_SHOWN = {"schema_version", "id", "dir", "probe", "params", "attempt", "started", "verdict"}


def e(value: Any) -> str:
    """Text for HTML: secrets masked, escaped."""
    return escape(redact(str(value)))


def pre_json(value: Any) -> str:
    return f"<pre><code>{e(json.dumps(value, indent=2, default=str))}</code></pre>"


def render(run_path: Path, document: Mapping[str, Any]) -> str:
    """The whole report of the run in ``run_path`` (``document`` is its run summary)."""
    rows = document["treatments"]
    summaries = {row["id"]: read_summary(run_path / row["dir"]) for row in rows}
    sections = [
        ("verdicts", "Verdicts", _verdicts(rows)),
        ("steps", "Steps", steps_view.section(document.get("steps") or [])),
        ("correctness", "Correctness", _correctness(run_path, rows, summaries)),
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
    run = document["run"]
    title = f"testbed · {document.get('campaign')} · {run['run_id']}"
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><title>{e(title)}</title>'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<link rel="icon" href="data:,"><style>{css}</style></head>\n<body>'
        f"{_header(document)}<nav>{nav}</nav>\n<main>{body}</main></body></html>\n"
    )


def _header(document: Mapping[str, Any]) -> str:
    run, machine = document["run"], document.get("machine") or {}
    counts = " ".join(f"{badge(s)} {n}" for s, n in sorted(document.get("counts", {}).items()))
    facts = {
        "started": run.get("started"),
        "testbed": document.get("testbed_version"),
        "campaign hash": document.get("campaign_hash"),
        "machine": f"{machine.get('hostname')} · {machine.get('cpu_count')} CPUs"
        f" · {machine.get('cpu_model') or ''} · {machine.get('platform') or ''}",
        "generated": document.get("generated"),
    }
    return (
        f"<header><h1>{e(document.get('campaign'))} · {e(run['run_id'])}"
        f" {badge(document['status'])}</h1><div>{counts}</div>{_kv(facts)}</header>"
    )


def _kv(values: Mapping[str, Any]) -> str:
    items = "".join(
        f"<dt>{e(k)}</dt><dd>{e(v)}</dd>" for k, v in values.items() if v not in (None, "")
    )
    return f'<dl class="kv">{items}</dl>'


def _params(params: Mapping[str, Any]) -> str:
    return "<br>".join(f"<code>{e(k)}={e(v)}</code>" for k, v in params.items())


def _verdicts(rows: Sequence[Mapping[str, Any]]) -> str:
    lines = [
        "<table><tr><th>#</th><th>treatment</th><th>probe</th><th>deployments</th>"
        "<th>params</th><th>verdict</th><th>reason and evidence</th></tr>"
    ]
    for number, row in enumerate(rows, start=1):
        evidence = row.get("evidence") or {}
        details = (
            f"<details><summary>evidence</summary>{pre_json(evidence)}</details>"
            if evidence
            else ""
        )
        lines.append(
            f'<tr><td class="num">{number}</td>'
            f'<td><a href="#t-{e(row["id"])}">{e(row["dir"])}</a></td><td>{e(row["probe"])}</td>'
            f"<td>{e(', '.join(row.get('deployments') or []))}</td>"
            f"<td>{_params(row['params'])}</td>"
            f"<td>{badge(row['status'])}</td><td>{e(row.get('reason') or '')}{details}"
            f"{_source(row)}</td></tr>"
        )
    lines.append("</table>")
    return "\n".join(lines)


# -- correctness ------------------------------------------------------------------------------


def divergence_html(d: Mapping[str, Any], labels: tuple[str, str] = ("expected", "actual")) -> str:
    """A first divergence: the shared text, then each side's token highlighted and its
    continuation (fields of the correctness probe's FirstDivergence or Divergence)."""
    prefix = str(d.get("common_prefix") or "")
    sides = [
        ("expected", d.get("expected_token", d.get("reference_token")),
         d.get("expected_continuation", d.get("reference_continuation"))),
        ("actual", d.get("actual_token", d.get("other_token")),
         d.get("actual_continuation", d.get("other_continuation"))),
    ]  # fmt: skip
    lines = []
    for (side, token, rest), label in zip(sides, labels, strict=True):
        shown_token = "∅ (ended)" if token is None else str(token)
        rest_text = str(rest or "")
        if token is not None and rest_text.startswith(str(token)):
            rest_text = rest_text[len(str(token)) :]
        lines.append(
            f"<div><b>{e(label)}:</b> …{e(prefix[-80:])}"
            f'<mark class="{side}">{e(shown_token)}</mark>{e(rest_text[:160])}</div>'
        )
    facts = {k: d.get(k) for k in ("index", "unit", "margin_nats", "near_tie", "kind")}
    return f'<div class="diff">{"".join(lines)}</div>{_kv(facts)}'


def text_divergence(expected: str, actual: str) -> dict[str, Any]:
    """The first differing character of two texts, in the shape of a divergence."""
    index = next(
        (i for i, (a, b) in enumerate(zip(expected, actual, strict=False)) if a != b),
        min(len(expected), len(actual)),
    )
    return {
        "index": index,
        "unit": "char",
        "common_prefix": expected[:index],
        "expected_token": expected[index] if index < len(expected) else None,
        "actual_token": actual[index] if index < len(actual) else None,
        "expected_continuation": expected[index:],
        "actual_continuation": actual[index:],
    }


def _differentials(run_path: Path, rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each deployment's answers against the reference deployment's (correctness.reference)."""
    try:
        found = differentials(run_path, rows)
    except (OSError, ValueError, KeyError, ImportError) as exc:
        return [f'<p class="muted">differential not computed: {e(exc)}</p>']
    parts = []
    for ref_row, row, summary in found:
        counts = {k: v for k, v in summary.items() if not isinstance(v, list | dict)}
        parts.append(f"<h3>{e(row['dir'])} against the reference {e(ref_row['dir'])}</h3>")
        parts.append(_kv(counts))
        for d in summary.get("divergences") or []:
            head = " · ".join(str(d[k]) for k in ("case", "protocol", "kind") if d.get(k))
            body = divergence_html(d, ("reference", "other"))
            parts.append(f"<h4>{e(head)}</h4><p>{e(d.get('detail') or '')}</p>{body}")
    return parts


def _correctness(
    run_path: Path, rows: Sequence[Mapping[str, Any]], summaries: Mapping[str, Any]
) -> str:
    parts = _differentials(run_path, rows)
    for row in rows:
        summary = summaries.get(row["id"]) or {}
        if row["probe"] != "correctness" or not summary:
            continue
        parts.append(f"<h3>{e(row['dir'])} {badge(row['status'])}</h3>")
        counts = summary.get("cases")
        if isinstance(counts, Mapping):
            parts.append(_kv(counts))
        nested = summary.get("differential")
        divergent = [
            *(summary.get("failures") or []),
            *(summary.get("divergences") or []),
            *((nested.get("divergences") or []) if isinstance(nested, Mapping) else []),
        ]
        for failure in divergent:
            if not isinstance(failure, Mapping):
                continue
            first = failure.get("first_divergence")
            if first is None and "common_prefix" in failure:
                first = failure
            if first is None and isinstance(failure.get("expected"), str):
                first = text_divergence(failure["expected"], str(failure.get("actual") or ""))
            head = " · ".join(
                str(failure[k]) for k in ("case", "protocol", "evaluator", "kind") if failure.get(k)
            )
            detail = e(failure.get("detail") or "")
            body = divergence_html(first) if first else pre_json(failure)
            parts.append(f"<h4>{e(head)}</h4><p>{detail}</p>{body}")
        for key in ("errors", "unchecked", "skipped"):
            entries = summary.get(key) or []
            if entries:
                items = "".join(
                    f"<li><code>{e(x.get('case'))}</code>: {e(x.get('reason'))}</li>"
                    for x in entries
                    if isinstance(x, Mapping)
                )
                parts.append(f"<p>{key}:</p><ul>{items}</ul>")
    return "\n".join(parts)


# -- A/B, treatments, plan, campaign, run -------------------------------------------------------


def _ab(run_path: Path, rows: Sequence[Mapping[str, Any]], summaries: Mapping[str, Any]) -> str:
    parts = []
    for number, row in enumerate(rows):
        if row["probe"] != "ab":
            continue
        summary = summaries.get(row["id"]) or {}
        parts.append(f"<h3>{e(row['dir'])} {badge(row['status'])}</h3><p>{e(row['reason'])}</p>")
        evidence = row.get("evidence") or {}
        parts.append(tree(evidence) if evidence else "")
        records = read_records(run_path / row["dir"] / RECORDS)
        parts.append(server_section(run_path / row["dir"], summary, records, f"ab-sm{number}"))
        rest = {k: v for k, v in summary.items() if k not in _SHOWN and k != "workers"}
        if rest:
            parts.append(f"<details><summary>summary</summary>{tree(rest)}</details>")
    return "\n".join(parts)


def tree(value: Any, depth: int = 0) -> str:
    """Nested mappings as nested tables; lists of scalars inline; anything else as JSON."""
    if isinstance(value, Mapping) and value and depth < 4:
        cells = "".join(
            f"<tr><th>{e(k)}</th><td>{tree(v, depth + 1)}</td></tr>" for k, v in value.items()
        )
        return f"<table>{cells}</table>"
    if isinstance(value, float):
        return e(f"{value:.6g}")
    if isinstance(value, str | int | bool) or value is None:
        return e(value)
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return e(", ".join(_scalar(v) for v in value)) if len(value) <= 20 else pre_json(value)
    if (
        isinstance(value, list)
        and value
        and depth < 4
        and all(isinstance(v, Mapping) for v in value)
    ):
        return _rows_table(value, depth)
    return pre_json(value)


def _scalar(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _rows_table(rows: Sequence[Mapping[str, Any]], depth: int) -> str:
    """A list of mappings (criteria, failures) as one table, a column per key."""
    columns: dict[str, None] = {}
    for row in rows[:200]:
        columns.update(dict.fromkeys(str(k) for k in row))
    head = "".join(f"<th>{e(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{tree(row.get(c), depth + 1)}</td>" for c in columns) + "</tr>"
        for row in rows[:200]
    )
    more = f'<p class="muted">{len(rows) - 200} more rows</p>' if len(rows) > 200 else ""
    return f"<table><tr>{head}</tr>{body}</table>{more}"


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


def _treatments(rows: Sequence[Mapping[str, Any]], summaries: Mapping[str, Any]) -> str:
    parts = []
    for row in rows:
        summary = summaries.get(row["id"]) or {}
        facts = {
            "probe": row["probe"],
            "deployments": ", ".join(row.get("deployments") or []),
            "attempt": row.get("attempt"),
            "started": row.get("started"),
            "duration": f"{row['duration_s']} s" if row.get("duration_s") is not None else None,
            "records": row.get("records"),
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
            f'<details id="t-{e(row["id"])}"><summary>{e(row["dir"])} {badge(row["status"])}'
            f"</summary>{_kv(facts)}{_params(row['params'])}{known}{stage_html}"
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
        f"<td>{_params(w.get('settings') or {})}</td></tr>"
        for w in plan.get("workers", [])
    )
    treatments = "".join(
        f'<tr><td class="num">{t["index"]}</td><td>{e(t["dir"])}</td><td>{e(t["probe"])}</td>'
        f"<td>{e(', '.join(t['workers']))}</td><td>{_params(t['params'])}</td>"
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


def _source(row: Mapping[str, Any]) -> str:
    """Where an assembled run's treatment came from (``testbed report DIR1 DIR2 …``)."""
    source = row.get("source")
    return f'<div class="source">from <code>{e(source)}</code></div>' if source else ""


def _sources(document: Mapping[str, Any]) -> str:
    """The run folders an assembled run was made of, one row each."""
    sources = document["run"].get("sources") or []
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


def _run(document: Mapping[str, Any]) -> str:
    return (
        f"<h3>Machine</h3>{tree(document.get('machine') or {})}"
        f"<h3>Servers</h3>{pre_json(document.get('servers') or [])}"
        f"<h3>run.json</h3>{tree(document['run'])}"
    )
