"""Load metrics as pure functions of request records (the formulas of DESIGN.md).

A *record* is one request as the load probe wrote it: raw monotonic nanosecond timestamps
``sent_ns``, ``chunks_ns`` (one per non-empty content chunk, in arrival order) and
``done_ns``, plus ``output_tokens`` and ``error``. Nothing here reads a clock or a file, so
every number in a summary can be recomputed from ``records.jsonl``.

Formulas (all times in milliseconds; a request is *ok* when ``error`` is None):

- **TTFT** = ``chunks_ns[0] − sent_ns``: first non-empty content chunk received − request
  sent (sent = just before the request bytes were written to the socket).
- **ITL** = every gap ``chunks_ns[i+1] − chunks_ns[i]``, pooled over all requests (a
  distribution of gaps, not of per-request means). Gaps inside one network read are 0.
- **TPOT** = ``(e2e − TTFT) / (output_tokens − 1)`` per request with ≥ 2 output tokens.
- **e2e** = ``done_ns − sent_ns`` (the last byte of the response received).
- **Steady-state window** ``[start, end)``: the stage's first send + ``warmup_s`` to its
  last scheduled send − ``cooldown_s``. Latency statistics use the ok requests *sent*
  inside the window.
- **Request throughput** = ok requests *completed* inside the window / window length.
- **Output-token throughput** = output tokens *received* inside the window / window length,
  each request's ``output_tokens`` spread evenly over its content chunks (so a request
  straddling the window edge counts only its part).
- **Goodput** = ok requests completed inside the window whose own TTFT, every ITL gap, TPOT
  and e2e meet each set SLO threshold, / window length.
- **Percentiles**: linear interpolation between closest ranks (numpy's default, as in
  vLLM's benchmark); ``p999`` is the 99.9th; ``std`` is the population deviation (ddof 0).
- **Merging** load processes is exact: concatenate their records, then compute (never
  average percentiles). Every sum is exactly rounded (``math.fsum``), so a statistic does
  not depend on the order of the records: merged parts give the very same numbers, bit for
  bit, as one process would.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

Record = Mapping[str, Any]

#: The percentiles every latency summary has, named as in summary.json.
PERCENTILES: dict[str, float] = {"p50": 50, "p90": 90, "p95": 95, "p99": 99, "p999": 99.9}

_MS = 1e-6  # nanoseconds to milliseconds


@dataclass(frozen=True)
class Window:
    """The steady-state window in monotonic nanoseconds, ``[start_ns, end_ns)``."""

    start_ns: int
    end_ns: int

    @property
    def seconds(self) -> float:
        return max(0, self.end_ns - self.start_ns) / 1e9

    def __contains__(self, t_ns: object) -> bool:
        return isinstance(t_ns, int) and self.start_ns <= t_ns < self.end_ns


def window(first_send_ns: int, last_send_ns: int, warmup_s: float, cooldown_s: float) -> Window:
    """The steady-state window of a stage that sent from ``first_send_ns`` to
    ``last_send_ns``."""
    return Window(
        first_send_ns + round(warmup_s * 1e9),
        max(first_send_ns, last_send_ns - round(cooldown_s * 1e9)),
    )


# -- per-request quantities ----------------------------------------------------------------


def is_ok(record: Record) -> bool:
    return record.get("error") is None


def ttft_ms(record: Record) -> float | None:
    chunks = record.get("chunks_ns")
    return (chunks[0] - record["sent_ns"]) * _MS if chunks else None


def itl_ms(record: Record) -> list[float]:
    chunks = record.get("chunks_ns") or []
    return [(b - a) * _MS for a, b in itertools.pairwise(chunks)]


def e2e_ms(record: Record) -> float | None:
    done = record.get("done_ns")
    return (done - record["sent_ns"]) * _MS if done else None


def tpot_ms(record: Record) -> float | None:
    ttft, e2e, tokens = ttft_ms(record), e2e_ms(record), record.get("output_tokens") or 0
    if ttft is None or e2e is None or tokens < 2:
        return None
    return (e2e - ttft) / (tokens - 1)


# -- distributions -------------------------------------------------------------------------


def distribution(values: Iterable[float]) -> dict[str, float | int | None]:
    """``p50 p90 p95 p99 p999 mean std n`` of ``values`` (None statistics when empty)."""
    import numpy as np  # here, not at import: the load generator's start-up stays short

    data = np.fromiter(values, dtype=float)
    if data.size == 0:
        return {**dict.fromkeys(PERCENTILES), "mean": None, "std": None, "n": 0}
    points = np.percentile(data, list(PERCENTILES.values()))
    out: dict[str, float | int | None] = {
        name: float(value) for name, value in zip(PERCENTILES, points, strict=True)
    }
    # numpy's pairwise sums depend on the order of the values; fsum's exact rounding does not
    mean = math.fsum(cast("list[float]", data.tolist())) / data.size
    deviations = data - mean
    out["mean"] = mean
    squares = cast("list[float]", (deviations * deviations).tolist())
    out["std"] = math.sqrt(math.fsum(squares) / data.size)
    out["n"] = int(data.size)
    return out


def in_window(records: Iterable[Record], win: Window) -> list[Record]:
    """The ok records sent inside ``win`` (the population of latency statistics)."""
    return [r for r in records if is_ok(r) and r["sent_ns"] in win]


def latency(records: Sequence[Record]) -> dict[str, dict[str, float | int | None]]:
    """``ttft_ms``, ``itl_ms``, ``tpot_ms``, ``e2e_ms`` distributions of ``records``."""
    return {
        "ttft_ms": distribution(v for r in records if (v := ttft_ms(r)) is not None),
        "itl_ms": distribution(gap for r in records for gap in itl_ms(r)),
        "tpot_ms": distribution(v for r in records if (v := tpot_ms(r)) is not None),
        "e2e_ms": distribution(v for r in records if (v := e2e_ms(r)) is not None),
    }


# -- throughput and goodput ----------------------------------------------------------------


def tokens_in_window(record: Record, win: Window) -> float:
    """The part of a request's output tokens that arrived inside ``win``."""
    chunks = record.get("chunks_ns") or []
    tokens = record.get("output_tokens") or 0
    if not chunks or not tokens:
        return 0.0
    inside = sum(1 for t in chunks if win.start_ns <= t < win.end_ns)
    return tokens * inside / len(chunks)


def throughput(records: Iterable[Record], win: Window) -> dict[str, float]:
    """``requests_per_s`` and ``output_tokens_per_s`` over ``win``."""
    seconds = win.seconds
    if seconds <= 0:
        return {"requests_per_s": 0.0, "output_tokens_per_s": 0.0}
    done = 0
    parts: list[float] = []  # summed with fsum: the total does not depend on record order
    for record in records:
        if not is_ok(record):
            continue
        if record.get("done_ns") in win:
            done += 1
        parts.append(tokens_in_window(record, win))
    return {"requests_per_s": done / seconds, "output_tokens_per_s": math.fsum(parts) / seconds}


def meets_slo_request(record: Record, slo: Mapping[str, float | None]) -> bool:
    """Whether one ok request is within every set threshold (``ttft_p99_ms``, ``itl_p99_ms``
    for each gap, ``tpot_p99_ms``, ``e2e_p99_ms``)."""
    if not is_ok(record):
        return False
    checks = (
        ("ttft_p99_ms", [ttft_ms(record)]),
        ("itl_p99_ms", itl_ms(record)),
        ("tpot_p99_ms", [tpot_ms(record)]),
        ("e2e_p99_ms", [e2e_ms(record)]),
    )
    for key, values in checks:
        bound = slo.get(key)
        if bound is not None and any(v is None or v > bound for v in values):
            return False
    return True


def goodput(records: Iterable[Record], win: Window, slo: Mapping[str, float | None]) -> float:
    """Requests per second completed inside ``win`` that meet every SLO threshold."""
    seconds = win.seconds
    if seconds <= 0:
        return 0.0
    good = sum(1 for r in records if r.get("done_ns") in win and meets_slo_request(r, slo))
    return good / seconds


_SLO_METRIC = {
    "ttft_p99_ms": "ttft_ms",
    "itl_p99_ms": "itl_ms",
    "tpot_p99_ms": "tpot_ms",
    "e2e_p99_ms": "e2e_ms",
}


def slo_violations(
    summary: Mapping[str, Any], slo: Mapping[str, float | None], success_ratio: float = 1.0
) -> list[str]:
    """Why a stage's summary misses its SLOs (empty when it meets them all)."""
    problems = []
    for key, metric in _SLO_METRIC.items():
        bound = slo.get(key)
        if bound is None:
            continue
        value = summary.get(metric, {}).get("p99")
        if value is None:
            problems.append(f"{metric} p99 has no data (bound {bound} ms)")
        elif value > bound:
            problems.append(f"{metric} p99 {value:.2f} ms > {bound:g} ms")
    minimum = slo.get("min_success_ratio")
    if minimum is not None and success_ratio < minimum:
        problems.append(f"success ratio {success_ratio:.4f} < {minimum:g}")
    return problems


def max_rate_meeting_slo(
    stages: Iterable[Mapping[str, Any]], slo: Mapping[str, float | None]
) -> float | None:
    """The highest achieved request rate among stages that meet every SLO (None if none)."""
    best: float | None = None
    for stage in stages:
        ratio = stage.get("requests", {}).get("success_ratio", 1.0)
        if slo_violations(stage, slo, ratio):
            continue
        rate = stage.get("throughput", {}).get("requests_per_s")
        if rate is not None and (best is None or rate > best):
            best = float(rate)
    return best


# -- time series ---------------------------------------------------------------------------


def in_flight(records: Iterable[Record], step_ns: int = 100_000_000) -> list[tuple[int, int]]:
    """Requests in flight sampled every ``step_ns``: ``[(t_ns, count), …]``."""
    events: list[tuple[int, int]] = []
    for record in records:
        start, end = record.get("sent_ns"), record.get("done_ns") or record.get("failed_ns")
        if start is None or end is None:
            continue
        events += [(start, 1), (end, -1)]
    if not events:
        return []
    events.sort()
    first, last = events[0][0], events[-1][0]
    series, level, i = [], 0, 0
    for t in range(first, last + step_ns, step_ns):
        while i < len(events) and events[i][0] <= t:
            level += events[i][1]
            i += 1
        series.append((t, level))
    return series


def merge(parts: Iterable[Iterable[Record]]) -> list[Record]:
    """Records of several load processes as one list, ordered by send time (exact merge)."""
    merged = [record for part in parts for record in part]
    merged.sort(key=lambda r: r.get("sent_ns", 0))
    return merged


def rate_of(times_ns: Sequence[int]) -> float:
    """Events per second over the span of ``times_ns`` (n−1 intervals; 0 when < 2)."""
    if len(times_ns) < 2:
        return 0.0
    span = (max(times_ns) - min(times_ns)) / 1e9
    return (len(times_ns) - 1) / span if span > 0 else math.inf
