"""The HTML report's block for a multi-turn load: per turn index its requests, mean prompt
tokens (the history grows) and TTFT/e2e, a line of the sessions' counts, and TTFT by turn
drawn by :mod:`testbed.probes.load.turn_plots` — where a prefix cache shows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from testbed.probes.load.turn_plots import ttft_by_turn
from testbed.report.plots import to_svg


def _ms(value: Any) -> str:
    return "–" if value is None else f"{value:.2f}"


def turns_block(key: str, summary: Mapping[str, Any], by_turn: Sequence[Mapping[str, Any]]) -> str:
    """The table, the sessions line and the figure (its SVG ids start with ``key``)."""
    head = "".join(
        f"<th>{h}</th>"
        for h in ("turn", "ok", "prompt tokens", "TTFT p50", "TTFT p90", "TTFT p99", "e2e p50")
    )
    rows = "".join(
        f"<tr><td>{t['turn']}</td><td>{t['ok']}/{t['requests']}</td>"
        f"<td>{t['input_tokens_mean']:.0f}</td>"
        + "".join(
            f"<td>{_ms(v)}</td>"
            for v in (t["ttft_ms"]["p50"], t["ttft_ms"]["p90"], t["ttft_ms"]["p99"])
        )
        + f"<td>{_ms(t['e2e_ms']['p50'])}</td></tr>"
        for t in by_turn
    )
    sessions = summary.get("sessions") or {}
    line = (
        f"<p>{sessions.get('count')} sessions, {sessions.get('turns_mean', 0):.1f} turns each on"
        f" average, {sessions.get('ended_by_error')} ended by an error</p>"
    )
    title = f"TTFT by turn · {summary.get('stage')}"
    figure = to_svg(ttft_by_turn({str(summary.get("stage")): by_turn}, title), key, title)
    return f"<table><tr>{head}</tr>{rows}</table>\n{line}\n{figure}"
