"""The scale part of the HTML report: per scale treatment, its thresholds judged, the
quantiles of every stage interval (Kaplan–Meier, with how many are still waiting), the
errors, and the stage plot and ``times.csv`` beside it in the treatment directory."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from testbed.results.run_summary import TreatmentRow


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def section(run_path: Path, rows: Sequence[TreatmentRow], summaries: Mapping[str, Any]) -> str:
    """The section's HTML; empty when the run has no scale treatment."""
    parts = []
    for row in rows:
        if row.probe != "scale":
            continue
        summary = (summaries.get(row.id) or {}).get("scale") or {}
        parts.append(
            f'<h3>{_e(row.dir)} <span class="badge {_e(row.status)}">{_e(row.status)}'
            f"</span></h3><p>{_e(row.reason)}</p>"
        )
        evidence = row.evidence
        parts.append(_thresholds(evidence.get("thresholds") or []))
        parts.append(_intervals(summary))
        errors = evidence.get("errors") or []
        if errors:
            items = "".join(f"<li>{_e(x['name'])}: {_e(x['error'])}</li>" for x in errors)
            parts.append(
                f"<p>{evidence.get('error_count', len(errors))} in error:</p><ul>{items}</ul>"
            )
        for name in summary.get("files") or []:
            if (run_path / row.dir / name).exists():
                link = f"{_e(row.dir)}/{_e(name)}"
                if name.endswith(".png"):
                    parts.append(
                        f'<p><img src="{link}" alt="stage deltas" style="max-width:100%"></p>'
                    )
                else:
                    parts.append(f'<p><a href="{link}">{_e(name)}</a></p>')
    return "\n".join(parts)


def _thresholds(checks: Sequence[Mapping[str, Any]]) -> str:
    if not checks:
        return ""
    body = "".join(
        f"<tr><td>{_e(c['threshold'])}</td><td>{_e(c['status'])}</td>"
        f'<td class="num">{_ms(c.get("value_ms"))}</td><td class="num">{c["limit_ms"]:g}</td>'
        f'<td class="num">{c["reached"]}</td><td class="num">{c["waiting"]}</td>'
        f"<td>{_e(c['why'])}</td></tr>"
        for c in checks
    )
    return (
        "<table><tr><th>threshold</th><th>status</th><th>value (ms)</th><th>limit (ms)</th>"
        f"<th>reached</th><th>waiting</th><th>why</th></tr>{body}</table>"
    )


def _intervals(summary: Mapping[str, Any]) -> str:
    intervals = summary.get("intervals") or {}
    if not intervals:
        return ""
    body = "".join(
        f"<tr><td>{_e(name)}</td>"
        + "".join(
            f'<td class="num">{_ms(stat.get(k))}</td>' for k in ("p50_ms", "p90_ms", "p99_ms")
        )
        + f'<td class="num">{stat.get("reached", 0)}</td>'
        + f'<td class="num">{stat.get("waiting", 0)}</td></tr>'
        for name, stat in intervals.items()
    )
    return (
        "<table><tr><th>interval</th><th>p50 (ms)</th><th>p90 (ms)</th><th>p99 (ms)</th>"
        f"<th>reached</th><th>still waiting</th></tr>{body}</table>"
        "<p>Quantiles are Kaplan–Meier estimates: workloads still waiting count as censored;"
        " n/a means the data cannot tell yet.</p>"
    )


def _ms(value: Any) -> str:
    return "n/a" if value is None else f"{float(value):.1f}"
