"""Arrival schedules (seeded, absolute) and the precise timer."""

from __future__ import annotations

import asyncio
import itertools
import statistics

import pytest

from testbed.core.clock import monotonic_ns
from testbed.probes.load.schedule import Arrivals, PreciseTimer, offsets_ns
from tests.sampling import median_interval


def gaps(offsets: list[int]) -> list[float]:
    return [(b - a) / 1e9 for a, b in itertools.pairwise(offsets)]


def test_constant_rate_is_exact() -> None:
    offsets = offsets_ns(Arrivals(50, "constant"), 2.0, None, seed=1)
    assert len(offsets) == 100
    assert offsets[0] == 0
    assert set(gaps(offsets)) == {0.02}


def test_poisson_rate_and_seed() -> None:
    a = offsets_ns(Arrivals(200, "poisson"), 20.0, None, seed=3)
    assert len(a) == pytest.approx(4000, rel=0.05)
    cv = statistics.pstdev(gaps(a)) / statistics.mean(gaps(a))
    assert cv == pytest.approx(1.0, abs=0.1)
    assert a == offsets_ns(Arrivals(200, "poisson"), 20.0, None, seed=3)
    assert a != offsets_ns(Arrivals(200, "poisson"), 20.0, None, seed=4)


def test_gamma_shape_sets_burstiness() -> None:
    offsets = offsets_ns(Arrivals(100, "gamma", gamma_shape=4.0), 30.0, None, seed=1)
    cv = statistics.pstdev(gaps(offsets)) / statistics.mean(gaps(offsets))
    assert cv == pytest.approx(0.5, abs=0.06)  # 1 / sqrt(4)


def test_ramp_accumulates_the_mean_rate() -> None:
    offsets = offsets_ns(Arrivals(10, "constant", end_rate=30), 10.0, None, seed=1)
    assert len(offsets) == 200  # (10 + 30) / 2 * 10 s
    first, last = gaps(offsets[:10]), gaps(offsets[-10:])
    assert statistics.mean(first) > 2 * statistics.mean(last)


def test_request_count_bounds_the_schedule() -> None:
    assert len(offsets_ns(Arrivals(1000, "poisson"), None, 37, seed=1)) == 37
    assert len(offsets_ns(Arrivals(10, "poisson"), 1.0, 1000, seed=1)) < 30


@pytest.mark.timing
def test_precise_timer_wakes_close_to_the_deadline() -> None:
    async def lateness() -> list[int]:
        timer = PreciseTimer()
        assert timer.precise
        late = []
        try:
            for _ in range(30):
                due = monotonic_ns() + 700_000  # 0.7 ms: a loop timer would round to 1 ms+
                await timer.sleep_until(due)
                late.append(monotonic_ns() - due)
        finally:
            timer.close()
        return late

    late = asyncio.run(lateness())
    assert min(late) >= 0
    # well under the loop's millisecond, by the median's interval from these 30 wake-ups
    assert median_interval(late)[0] < 300_000, sorted(late)
