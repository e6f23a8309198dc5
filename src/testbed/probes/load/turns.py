"""Per-turn and per-session figures of a multi-turn load (pure functions of the records).

``by_turn`` lists, for each turn index (0: a session's first request), how many requests
ran and succeeded, their prompt tokens (the history grows with each turn) and their TTFT
and e2e distributions — where a server's prefix cache shows: later turns carry a longer
history but prefill only what the cache does not hold. ``sessions`` counts the sessions
that ran and how many turns each reached, and the distribution of their lengths in time
(first send to last answer). Turns are judged in the stage's steady-state window, as every
latency of the summary is; sessions are counted whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from testbed.results import metrics
from testbed.results.metrics import Record


def session_figures(records: Sequence[Record], win: metrics.Window) -> dict[str, Any] | None:
    """``{"by_turn": [...], "sessions": {...}}``, or None when no record has a turn."""
    turned = [r for r in records if r.get("turn") is not None]
    if not turned:
        return None
    return {"by_turn": _by_turn(turned, win), "sessions": _sessions(turned)}


def _by_turn(records: list[Record], win: metrics.Window) -> list[dict[str, Any]]:
    groups: dict[int, list[Record]] = {}
    for record in records:
        groups.setdefault(int(record["turn"]), []).append(record)
    out = []
    for turn in sorted(groups):
        group = groups[turn]
        population = metrics.in_window(group, win)
        inputs = [r["input_tokens"] for r in group]
        out.append(
            {
                "turn": turn,
                "requests": len(group),
                "ok": sum(1 for r in group if metrics.is_ok(r)),
                "input_tokens_mean": sum(inputs) / len(inputs),
                "ttft_ms": _brief(metrics.ttft_ms(r) for r in population),
                "e2e_ms": _brief(metrics.e2e_ms(r) for r in population),
            }
        )
    return out


def _brief(values: Any) -> dict[str, float | int | None]:
    """p50, p90, p99, mean and n of the values that exist."""
    found = metrics.distribution(v for v in values if v is not None)
    return {k: found[k] for k in ("p50", "p90", "p99", "mean", "n")}


def _sessions(records: list[Record]) -> dict[str, Any]:
    groups: dict[int, list[Record]] = {}
    for record in records:
        groups.setdefault(int(record["session"]), []).append(record)
    turns = [len(g) for g in groups.values()]
    failed = sum(1 for g in groups.values() if not all(metrics.is_ok(r) for r in g))
    spans = []
    for group in groups.values():
        sent = [r["sent_ns"] for r in group if r.get("sent_ns")]
        done = [r["done_ns"] for r in group if r.get("done_ns")]
        if sent and done:
            spans.append((max(done) - min(sent)) / 1e9)
    return {
        "count": len(groups),
        "ended_by_error": failed,
        "turns_mean": sum(turns) / len(turns),
        "turns_max": max(turns),
        "duration_s": _brief(spans),
    }
