"""The metric formulas on hand-made records, and properties of percentiles and merging."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from testbed.results import metrics as m

MS = 1_000_000


def rec(
    sent: int, chunks: list[int], done: int, tokens: int, error: str | None = None
) -> dict[str, Any]:
    return {
        "sent_ns": sent * MS,
        "chunks_ns": [c * MS for c in chunks],
        "done_ns": done * MS,
        "output_tokens": tokens,
        "error": error,
    }


def test_per_request_formulas() -> None:
    r = rec(100, [150, 160, 180], 181, 3)
    assert m.ttft_ms(r) == pytest.approx(50)
    assert m.itl_ms(r) == pytest.approx([10, 20])
    assert m.e2e_ms(r) == pytest.approx(81)
    assert m.tpot_ms(r) == pytest.approx((81 - 50) / 2)
    assert m.tpot_ms(rec(0, [5], 6, 1)) is None
    assert m.ttft_ms(rec(0, [], 6, 0)) is None


def test_distribution_matches_numpy_linear_percentiles() -> None:
    d = m.distribution([1.0, 2.0, 3.0, 4.0])
    assert d["p50"] == pytest.approx(2.5)
    assert d["p90"] == pytest.approx(3.7)
    assert d["mean"] == pytest.approx(2.5)
    assert d["std"] == pytest.approx(math.sqrt(1.25))
    assert d["n"] == 4
    assert m.distribution([])["p99"] is None


def test_window_throughput_counts_only_inside() -> None:
    win = m.Window(1000 * MS, 2000 * MS)
    records = [
        rec(900, [950, 1050], 1100, 2),  # sent before, done inside: counts, half its tokens
        rec(1500, [1600, 1700], 1800, 4),  # fully inside
        rec(1900, [1950, 2050], 2100, 2, None),  # done after: only one of its two chunks
        rec(1500, [], 1600, 0, "HTTP 500"),  # errors never count
    ]
    t = m.throughput(records, win)
    assert t["requests_per_s"] == pytest.approx(2.0)
    assert t["output_tokens_per_s"] == pytest.approx(1 + 4 + 1)
    assert len(m.in_window(records, win)) == 2


def test_goodput_and_slo() -> None:
    win = m.Window(0, 10_000 * MS)
    fast = rec(0, [10, 12, 14], 15, 3)
    slow_ttft = rec(0, [900, 902], 903, 2)
    slow_gap = rec(0, [10, 200], 201, 2)
    slo = {"ttft_p99_ms": 100.0, "itl_p99_ms": 50.0}
    assert [m.meets_slo_request(r, slo) for r in (fast, slow_ttft, slow_gap)] == [
        True,
        False,
        False,
    ]
    assert m.goodput([fast, slow_ttft, slow_gap], win, slo) == pytest.approx(0.1)
    summary = {"ttft_ms": {"p99": 120.0}, "itl_ms": {"p99": 10.0}}
    assert m.slo_violations(summary, slo) == ["ttft_ms p99 120.00 ms > 100 ms"]
    stages = [
        {**summary, "throughput": {"requests_per_s": 50.0}},
        {"ttft_ms": {"p99": 90.0}, "itl_ms": {"p99": 10.0}, "throughput": {"requests_per_s": 30.0}},
        {"ttft_ms": {"p99": 20.0}, "itl_ms": {"p99": 5.0}, "throughput": {"requests_per_s": 10.0}},
    ]
    assert m.max_rate_meeting_slo(stages, slo) == 30.0


def test_window_from_stage_bounds() -> None:
    win = m.window(0, 10 * 10**9, warmup_s=1, cooldown_s=2)
    assert (win.start_ns, win.end_ns, win.seconds) == (10**9, 8 * 10**9, 7.0)


def test_in_flight_series() -> None:
    series = m.in_flight([rec(0, [], 250, 0), rec(100, [], 150, 0)], step_ns=100 * MS)
    assert series == [(0, 1), (100 * MS, 2), (200 * MS, 1), (300 * MS, 0)]


records_strategy = st.lists(
    st.tuples(
        st.integers(0, 10_000),
        st.lists(st.integers(0, 500), min_size=1, max_size=8),
        st.integers(0, 100),
    ).map(
        lambda t: rec(
            t[0],
            [t[0] + sum(t[1][: i + 1]) for i in range(len(t[1]))],
            t[0] + sum(t[1]) + t[2],
            len(t[1]),
        )
    ),
    min_size=1,
    max_size=60,
)


@given(records_strategy, st.integers(1, 5))
def test_merging_process_parts_is_exact(records: list[dict[str, Any]], parts: int) -> None:
    split = [records[i::parts] for i in range(parts)]
    merged = m.merge(split)
    assert len(merged) == len(records)
    # exactly equal, not approximately: no statistic depends on the order of the records
    assert m.latency(merged) == m.latency(records)
    win = m.Window(0, 20_000 * MS)
    assert m.throughput(merged, win) == m.throughput(records, win)


@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=200), st.randoms())
def test_statistics_do_not_depend_on_the_order_of_values(values: list[float], rnd: Any) -> None:
    shuffled = list(values)
    rnd.shuffle(shuffled)
    assert m.distribution(shuffled) == m.distribution(values)


@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=200))
def test_percentiles_are_ordered_and_bounded(values: list[float]) -> None:
    d = m.distribution(values)
    ordered = [d[name] for name in m.PERCENTILES]
    assert ordered == sorted(ordered)  # type: ignore[type-var]
    assert min(values) <= d["p50"] <= max(values)  # type: ignore[operator]
    assert d["n"] == len(values)
