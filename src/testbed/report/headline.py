"""The figures a reader of a load test looks for first, at the top of report.html: one row
per load treatment — its verdict, throughput, goodput, errors, and the TTFT, ITL, TPOT and
end-to-end latency percentiles of its steady-state window (a sweep's headline stage, with
the highest rate that met its SLOs). The same numbers as the terminal's table
(:mod:`testbed.probes.load.table`), from the same summary keys.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from testbed.report.badges import badge
from testbed.report.html_blocks import e
from testbed.results.run_summary import TreatmentRow

#: (heading, summary key, statistic, digits): the latency columns, in milliseconds.
LATENCIES = (
    ("TTFT p50", "ttft_ms", "p50", 2),
    ("TTFT p90", "ttft_ms", "p90", 2),
    ("TTFT p99", "ttft_ms", "p99", 2),
    ("ITL p50", "itl_ms", "p50", 2),
    ("ITL p99", "itl_ms", "p99", 2),
    ("TPOT p50", "tpot_ms", "p50", 2),
    ("E2E p50", "e2e_ms", "p50", 1),
    ("E2E p99", "e2e_ms", "p99", 1),
)


def _number(value: Any, digits: int) -> str:
    return "–" if not isinstance(value, int | float) else f"{value:,.{digits}f}"


def _cell(value: Any, digits: int, why_absent: str = "") -> str:
    title = f' title="{e(why_absent)}"' if why_absent and value is None else ""
    return f'<td class="num"{title}>{_number(value, digits)}</td>'


def section(rows: Sequence[TreatmentRow], summaries: Mapping[str, Any]) -> str:
    """The table (empty when no load treatment has figures)."""
    lines = []
    for row in rows:
        summary = summaries.get(row.id) or {}
        if row.probe != "load" or "ttft_ms" not in summary:
            continue
        lines.append(_row(row, summary))
    if not lines:
        return ""
    heads = ["treatment", "verdict", "stage", "req/s", "output tok/s", "goodput req/s"]
    heads += [name for name, *_ in LATENCIES] + ["errors", "prefix cache hits"]
    header = "".join(f"<th>{e(h)}</th>" for h in heads)
    return (
        '<table class="headline"><tr>' + header + "</tr>" + "".join(lines) + "</table>"
        '<p class="muted">latencies in ms over each steady-state window; goodput: requests'
        " per second meeting every SLO (– without SLOs); prefix cache hits: % of prompt tokens"
        " the servers found in their prefix caches (their own counters, all pods)</p>"
    )


def _row(row: TreatmentRow, summary: Mapping[str, Any]) -> str:
    throughput = summary.get("throughput") or {}
    requests = summary.get("requests") or {}
    stage = str(summary.get("stage") or "")
    best = summary.get("max_rate_meeting_slo")
    if isinstance(best, int | float):
        stage += f" (≤ {best:.2f}/s meets the SLOs)"
    cells = [
        f'<td><a href="#load-{e(row.id)}">{e(row.dir)}</a></td>',
        f"<td>{badge(row.status)}</td>",
        f"<td>{e(stage)}</td>",
        _cell(throughput.get("requests_per_s"), 2),
        _cell(throughput.get("output_tokens_per_s"), 0),
        _cell(throughput.get("goodput_requests_per_s"), 2, "no SLO set"),
    ]
    for _, key, stat, digits in LATENCIES:
        cells.append(_cell((summary.get(key) or {}).get(stat), digits))
    errors, total = requests.get("errors"), requests.get("total")
    flag = ' class="num flag"' if errors else ' class="num"'
    cells.append(f"<td{flag}>{e(errors)}/{e(total)}</td>")
    # the server's own count (its prefix-cache counters, every pod summed): what routing won
    rate = (summary.get("server_metrics") or {}).get("prefix_cache_hit_rate")
    cells.append(_cell(rate * 100 if isinstance(rate, int | float) else None, 1, "no counters"))
    return "<tr>" + "".join(cells) + "</tr>"
