"""How correctness results look: terminal tables, failure diffs, JUnit test cases.

Pure renderers over the probe's records and summary, for the report layer to call (the
probe itself prints nothing): :func:`case_table` is tgis-tester's "run completed" screen
(every case with PASS, UNCHECKED, FAIL, ERROR or SKIPPED and why), :func:`failure_diff`
shows a failed answer with its first divergent token highlighted,
:func:`differential_table` the cross-configuration differential, and :func:`junit_cases`
adds one JUnit ``<testcase>`` per case result to a suite, so that CI lists cases, not just
treatments.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rich.table import Table
from rich.text import Text

#: Case outcomes and their colours. UNCHECKED: ran (its stream checked) but compared to
#: nothing (``skip_check``) — shown and counted on its own, never as passed.
STYLES = {
    "PASS": "green",
    "UNCHECKED": "yellow",
    "FAIL": "bold red",
    "ERROR": "bold magenta",
    "SKIPPED": "dim",
}


def case_rows(records: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The case results among a treatment's records, sorted by id."""
    return sorted((r for r in records if r.get("kind") == "case"), key=case_id)


def case_id(record: Mapping[str, Any]) -> str:
    """A case result's id: ``case/protocol`` (``…/stream`` for a streaming twin)."""
    if record.get("id"):
        return str(record["id"])
    twin = "/stream" if record.get("stream") else ""
    return f"{record.get('case')}/{record.get('protocol')}{twin}"


def case_table(records: Iterable[Mapping[str, Any]], title: str = "cases") -> Table:
    """One row per case result: id, status and the reason (failed evaluators, cause, rule)."""
    rows = case_rows(records)
    counts = {s: sum(1 for r in rows if r["status"] == s) for s in STYLES}
    caption = " · ".join(f"{n} {s.lower()}" for s, n in counts.items() if n)
    table = Table(title=title, caption=caption, title_justify="left")
    for column in ("case", "protocol", "request", "status", "why"):
        table.add_column(column, overflow="fold")
    for row in rows:
        status = str(row["status"])
        style = STYLES.get(status, "")
        table.add_row(
            str(row["case"]),
            str(row["protocol"]),
            "stream" if row.get("stream") else "unary",
            Text(status, style=style),
            str(row.get("reason") or "")[:160],
        )
    return table


def _side(prefix: str, token: Any, rest: str, style: str) -> Text:
    text = Text("…" + prefix[-50:], style="dim")
    shown = "∅ (ended)" if token is None else str(token)
    text.append(shown.replace("\n", "⏎"), style=f"bold reverse {style}")
    if token is not None and rest.startswith(str(token)):
        rest = rest[len(str(token)) :]
    text.append(rest[:100].replace("\n", "⏎"))
    return text


def divergence_text(first: Mapping[str, Any]) -> Text:
    """Both sides of a first divergence, the divergent token highlighted, then its margin."""
    prefix = str(first.get("common_prefix") or "")
    expected_token = first.get("expected_token", first.get("reference_token"))
    actual_token = first.get("actual_token", first.get("other_token"))
    expected_rest = first.get("expected_continuation", first.get("reference_continuation"))
    actual_rest = first.get("actual_continuation", first.get("other_continuation"))
    out = Text("expected: ", style="bold")
    out.append_text(_side(prefix, expected_token, str(expected_rest or ""), "green"))
    out.append("\nactual:   ", style="bold")
    out.append_text(_side(prefix, actual_token, str(actual_rest or ""), "red"))
    facts = f"\n{first.get('unit', 'token')} {first.get('index')}"
    margin = first.get("margin_nats")
    if margin is not None:
        tie = first.get("near_tie")
        verdict = "near-tie (numerical noise)" if tie else "real difference"
        facts += f", margin {margin:.4f} nats: {verdict if tie is not None else 'sampled'}"
    out.append(facts, style="italic")
    return out


def failure_diff(failure: Mapping[str, Any]) -> Text:
    """One failure of the summary: which case and evaluator, why, and the divergence."""
    out = Text(f"{failure.get('case')} · {failure.get('evaluator')}\n", style="bold red")
    out.append(str(failure.get("detail") or "") + "\n")
    first = failure.get("first_divergence")
    if isinstance(first, Mapping):
        out.append_text(divergence_text(first))
    else:
        out.append(f"expected: {json.dumps(failure.get('expected'))[:300]}\n")
        out.append(f"actual:   {json.dumps(failure.get('actual'))[:300]}")
    return out


def differential_table(name: str, summary: Mapping[str, Any]) -> Table:
    """The divergences of one configuration from the reference (``differential_summary``)."""
    counts = ("compared", "identical", "near_ties", "different", "unclassified", "error_mismatch")
    caption = " · ".join(f"{summary.get(k, 0)} {k.replace('_', ' ')}" for k in counts)
    table = Table(title=f"{name} vs reference", caption=caption, title_justify="left")
    for column in ("case", "kind", "at", "reference", "other", "margin"):
        table.add_column(column, overflow="fold")
    for d in summary.get("divergences") or []:
        margin = d.get("margin_nats")
        located = d.get("index") is not None
        table.add_row(
            f"{d['case']}/{d['protocol']}",
            Text(str(d["kind"]), style="yellow" if d["kind"] == "near_tie" else "red"),
            f"{d.get('unit')} {d.get('index')}" if located else str(d.get("detail") or "")[:80],
            repr(d.get("reference_token")) if located else "",
            repr(d.get("other_token")) if located else "",
            f"{margin:.4f}" if margin is not None else "",
        )
    return table


def junit_cases(
    suite: ET.Element, records: Sequence[Mapping[str, Any]], classname: str
) -> dict[str, int]:
    """Add a ``<testcase>`` per case result to ``suite``; the counts JUnit wants."""
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for row in case_rows(records):
        counts["tests"] += 1
        case = ET.SubElement(
            suite,
            "testcase",
            classname=classname,
            name=case_id(row),
            time=f"{float(row.get('duration_ms') or 0) / 1000:.3f}",
        )
        status, reason = str(row["status"]), str(row.get("reason") or "")
        if status == "FAIL":
            failed = [c for c in row.get("checks") or [] if not c.get("passed")]
            body = json.dumps(failed, indent=2, ensure_ascii=False)
            ET.SubElement(case, "failure", message=reason[:500], type="FAIL").text = body
            counts["failures"] += 1
        elif status == "ERROR":
            ET.SubElement(case, "error", message=reason[:500], type="ERROR")
            counts["errors"] += 1
        elif status in ("SKIPPED", "UNCHECKED"):
            # JUnit has no "ran, compared nothing": a skip whose message says so, as the
            # INCONCLUSIVE treatments are, so CI never counts it as a pass.
            message = reason if status == "SKIPPED" else f"UNCHECKED: {reason}"
            ET.SubElement(case, "skipped", message=message[:500])
            counts["skipped"] += 1
    return counts
