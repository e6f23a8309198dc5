"""The run's criteria (:mod:`testbed.report.criteria`) in the terminal and in report.html: one
row per comparison with both values, the change and its interval, and the verdict."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape as e
from typing import Any

from rich.table import Table

from testbed.report.badges import badge, styled
from testbed.results.run_summary import RunSummary


def _values(chosen: Mapping[str, Any]) -> str:
    return ", ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in chosen.items())


def _change(c: Mapping[str, Any]) -> str:
    if "interval" not in c:
        return ""
    scale, unit = (100, "%") if c.get("relative") else (1, "")
    low, high = c["interval"]
    return f"{c['change'] * scale:+.1f}{unit} [{low * scale:+.1f}{unit}, {high * scale:+.1f}{unit}]"


def _number(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, (int, float)) else ""


def rows(document: RunSummary) -> list[tuple[str, ...]]:
    """(criterion, candidate vs baseline, baseline value, candidate value, change, verdict,
    reason) per comparison."""
    out: list[tuple[str, ...]] = []
    for criterion in document.criteria:
        for c in criterion["comparisons"]:
            out.append(
                (
                    f"{criterion['name']} ({criterion['metric']}, better by"
                    f" {criterion['better_by'] or 'any'})",
                    f"{_values(c['candidate_values'])} vs {_values(c['baseline_values'])}",
                    _number(c.get("base_value")),
                    _number(c.get("candidate_value")),
                    _change(c),
                    str(c["status"]),
                    str(c.get("reason", "")),
                )
            )
    return out


HEADERS = ("criterion", "comparison", "baseline", "candidate", "change [interval]", "verdict")


def table(document: RunSummary) -> Table | None:
    found = rows(document)
    if not found:
        return None
    out = Table(title="Criteria", title_justify="left")
    for header in HEADERS:
        out.add_column(header, overflow="fold")
    for row in found:
        out.add_row(*row[:5], styled(row[5]))
    return out


def section(document: RunSummary) -> str:
    """The HTML table (empty when the campaign has no criteria)."""
    found = rows(document)
    if not found:
        return ""
    head = "".join(f"<th>{e(h)}</th>" for h in HEADERS)
    body = "".join(
        "<tr>" + "".join(f"<td>{e(cell)}</td>" for cell in row[:5])
        + f"<td>{badge(row[5])}</td></tr>"
        + f'<tr><td colspan="6" class="reason">{e(row[6])}</td></tr>'
        for row in found
    )  # fmt: skip
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
