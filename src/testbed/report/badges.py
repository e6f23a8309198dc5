"""A verdict as the report shows it: coloured in the terminal, a badge in the HTML report;
and what a run skipped, in the words both show it in.

Both the run's own views (console, html) and the views they include (criteria) show
statuses this way, so it lives below all of them.
"""

from __future__ import annotations

from html import escape

from testbed.report.live import STYLE
from testbed.results.run_summary import RunSummary
from testbed.results.verdict import Status


def styled(status: str) -> str:
    """``status`` in its colour (a status this version does not know stays plain)."""
    style = STYLE.get(Status(status), "") if status in set(Status) else ""
    return f"[{style}]{status}[/{style}]" if style else status


def badge(status: str) -> str:
    """``status`` as an HTML badge (its CSS class is the status, spaces as dashes)."""
    return f'<span class="badge {escape(status.replace(" ", "-"))}">{escape(status)}</span>'


def skipped_note(document: RunSummary) -> str:
    """What the run skipped (``summary.json``'s ``skipped``), e.g. ``skipped: 1 treatment,
    11 cases``; empty when nothing was skipped — so a partial skip is never out of sight."""
    skipped = document.skipped
    parts = [
        f"{n} {noun}{'' if n == 1 else 's'}"
        for noun, n in (
            ("treatment", skipped.treatments),
            ("case", skipped.cases),
        )
        if n
    ]
    return f"skipped: {', '.join(parts)}" if parts else ""
