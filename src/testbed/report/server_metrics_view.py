"""Server metrics in the HTML report and the terminal, below each treatment's client plots.

For a load or A/B treatment whose summary has a ``server_metrics`` part: the figure of
:mod:`testbed.probes.server_metrics.plots` (from the treatment's ``server_metrics.jsonl``
and records), a table per deployment (running and waiting requests, KV-cache usage, the
server's token counts beside the client's) and the flagged mismatches. The terminal gets
one line per flagged mismatch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from testbed.core.secrets import redact
from testbed.probes.server_metrics import SAMPLES_FILE
from testbed.probes.server_metrics.plots import figure
from testbed.probes.server_metrics.summary import read_samples
from testbed.report.plots import to_svg


def _e(value: Any) -> str:
    return escape(redact(str(value)))


def _num(value: Any, fmt: str = "{:.4g}") -> str:
    return "–" if value is None else _e(fmt.format(value))


def _gauge(part: Mapping[str, Any] | None, scale: float = 1.0) -> str:
    if not part:
        return "–"
    return f"{_num(part['mean'] * scale)} / {_num(part['max'] * scale)}"


def _hits(cache: Mapping[str, Any] | None) -> str:
    if not cache or cache.get("hit_rate") is None:
        return "–"
    rate = _num(cache["hit_rate"], "{:.1%}")
    return f"{rate} ({_num(cache['hits'], '{:.0f}')} / {_num(cache['queries'], '{:.0f}')})"


def table(summary: Mapping[str, Any]) -> str:
    """Per deployment: gauges (window mean / max) and token counts, server beside client."""
    rows = []
    for name, part in (summary.get("deployments") or {}).items():
        client = part.get("client") or {}
        rows.append(
            f"<tr><td>{_e(name)}</td><td class='num'>{part.get('samples')}</td>"
            f"<td class='num'>{_gauge(part.get('running'))}</td>"
            f"<td class='num'>{_gauge(part.get('waiting'))}</td>"
            f"<td class='num'>{_gauge(part.get('kv_cache_usage'), 100.0)}</td>"
            f"<td class='num'>{_num(part.get('prompt_tokens'), '{:.0f}')}"
            f" / {_num(client.get('prompt_tokens'), '{:.0f}')}</td>"
            f"<td class='num'>{_num(part.get('generation_tokens'), '{:.0f}')}"
            f" / {_num(client.get('output_tokens'), '{:.0f}')}</td>"
            f"<td class='num'>{_num(part.get('generation_tokens_per_s'), '{:.1f}')}</td>"
            f"<td class='num'>{_hits(part.get('prefix_cache'))}</td></tr>"
        )
    head = (
        "<tr><th>deployment</th><th>samples</th><th>running (mean / max)</th>"
        "<th>waiting (mean / max)</th><th>KV cache % (mean / max)</th>"
        "<th>prompt tokens (server / client)</th><th>output tokens (server / client)</th>"
        "<th>server output tokens/s</th><th>prefix cache hits (tokens found / looked up)</th>"
        "</tr>"
    )
    return f"<table>{head}{''.join(rows)}</table>" if rows else ""


def notes(summary: Mapping[str, Any]) -> str:
    """The flagged mismatches (as failures) and the sampler's problems (muted)."""
    threshold = summary.get("token_mismatch_threshold")
    flagged = "".join(
        f'<p class="flag">⚠ token counts differ beyond {_num(threshold, "{:.1%}")}: {_e(f)}</p>'
        for f in summary.get("flagged") or []
    )
    problems = "".join(f'<p class="muted">{_e(p)}</p>' for p in summary.get("problems") or [])
    sampler = summary.get("sampler") or {}
    cost = (
        f'<p class="muted">{sampler.get("scrapes")} scrapes every {summary.get("interval_s")} s'
        f" in a separate process; {_num(sampler.get('cpu_ms_per_scrape'), '{:.2f}')} ms CPU"
        " per scrape</p>"
        if sampler.get("scrapes")
        else ""
    )
    return flagged + problems + cost


def section(
    treatment_dir: Path,
    summary: Mapping[str, Any],
    records: Sequence[Mapping[str, Any]],
    key: str,
    window_ns: tuple[int, int] | None = None,
) -> str:
    """The server metrics of one treatment (empty when it has none)."""
    part = summary.get("server_metrics")
    if not isinstance(part, Mapping) or not part.get("enabled", True):
        return ""
    samples = read_samples(treatment_dir / SAMPLES_FILE)
    html = ["<h4>Server metrics</h4>"]
    if any(not s.get("error") for s in samples):
        fig = figure(samples, records, float(part.get("interval_s") or 1.0), window_ns)
        html.append(to_svg(fig, key, "server metrics"))
    html.append(table(part))
    html.append(notes(part))
    return "\n".join(html)


def terminal_lines(label: str, summary: Mapping[str, Any]) -> list[str]:
    """One rich-markup line per flagged mismatch of a treatment."""
    part = summary.get("server_metrics")
    if not isinstance(part, Mapping):
        return []
    threshold = part.get("token_mismatch_threshold") or 0.0
    return [
        f"[yellow]{escape_markup(label)}: server and client token counts differ beyond"
        f" {threshold:.1%}:[/yellow] {escape_markup(flag)}"
        for flag in part.get("flagged") or []
    ]


def escape_markup(text: str) -> str:
    """``text`` safe inside rich markup (square brackets escaped), secrets masked."""
    from rich.markup import escape as rich_escape

    return rich_escape(redact(text))
