"""The HTML report's correctness section: each failure with its first divergence highlighted,
and each deployment's answers against the reference deployment's (``correctness.reference``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from testbed.report.badges import badge
from testbed.report.differential_view import differentials
from testbed.report.html_blocks import e, kv, pre_json
from testbed.results.run_summary import TreatmentRow


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
    return f'<div class="diff">{"".join(lines)}</div>{kv(facts)}'


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


def _differentials(run_path: Path, rows: Sequence[TreatmentRow]) -> list[str]:
    """Each deployment's answers against the reference deployment's (correctness.reference)."""
    try:
        found = differentials(run_path, rows)
    except (OSError, ValueError, KeyError, ImportError) as exc:
        return [f'<p class="muted">differential not computed: {e(exc)}</p>']
    parts = []
    for ref_row, row, summary in found:
        counts = {k: v for k, v in summary.items() if not isinstance(v, list | dict)}
        parts.append(f"<h3>{e(row.dir)} against the reference {e(ref_row.dir)}</h3>")
        parts.append(kv(counts))
        for d in summary.get("divergences") or []:
            head = " · ".join(str(d[k]) for k in ("case", "protocol", "kind") if d.get(k))
            body = divergence_html(d, ("reference", "other"))
            parts.append(f"<h4>{e(head)}</h4><p>{e(d.get('detail') or '')}</p>{body}")
    return parts


def section(run_path: Path, rows: Sequence[TreatmentRow], summaries: Mapping[str, Any]) -> str:
    parts = _differentials(run_path, rows)
    for row in rows:
        summary = summaries.get(row.id) or {}
        if row.probe != "correctness" or not summary:
            continue
        parts.append(f"<h3>{e(row.dir)} {badge(row.status)}</h3>")
        counts = summary.get("cases")
        if isinstance(counts, Mapping):
            parts.append(kv(counts))
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
