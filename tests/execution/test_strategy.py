"""Parallelism strategies: how many worker sets run at once, and in which waves."""

from __future__ import annotations

import asyncio

import pytest

from testbed.config.execution import Execution
from testbed.execution.grouping import WorkerSet
from testbed.execution.strategy import run_worker_sets
from testbed.plan.model import Treatment


def worker_sets(n: int, groups: int = 1) -> list[WorkerSet]:
    made = []
    for i in range(n):
        t = Treatment(i + 1, f"t{i}", f"s{i}", "load", (f"w{i}",), "k", {})
        made.append(WorkerSet((f"w{i}",), [t], group=(i % groups,)))
    return made


class Recorder:
    """Runs each worker set for a few loop turns and records overlaps and start order."""

    def __init__(self) -> None:
        self.running: set[str] = set()
        self.peak = 0
        self.events: list[tuple[str, str]] = []
        self.release = asyncio.Event()

    async def __call__(self, worker_set: WorkerSet) -> None:
        self.running.add(worker_set.name)
        self.peak = max(self.peak, len(self.running))
        self.events.append(("start", worker_set.name))
        for _ in range(5):
            await asyncio.sleep(0)
        self.running.discard(worker_set.name)
        self.events.append(("end", worker_set.name))


async def run(strategy: str, n: int, width: int | None, cpus: float = 64, groups: int = 1):  # type: ignore[no-untyped-def]
    recorder = Recorder()
    execution = Execution(strategy=strategy, max_parallel=width)  # type: ignore[arg-type]
    await run_worker_sets(
        worker_sets(n, groups), execution, cpus, lambda _j: 1.0, recorder, asyncio.Event()
    )
    return recorder


@pytest.mark.parametrize(
    ("strategy", "width", "peak"),
    [("sequential", None, 1), ("parallel", None, 6), ("parallel", 2, 2), ("sliding", 3, 3)],
)
async def test_peak_concurrency(strategy: str, width: int | None, peak: int) -> None:
    recorder = await run(strategy, 6, width)
    assert recorder.peak == peak
    assert len([e for e in recorder.events if e[0] == "end"]) == 6


async def test_barrier_waves_finish_before_the_next_starts() -> None:
    recorder = await run("barrier", 5, 2)
    starts = [i for i, e in enumerate(recorder.events) if e[0] == "start"]
    ends = [i for i, e in enumerate(recorder.events) if e[0] == "end"]
    # Wave 1 = worker sets 0,1; wave 2 = 2,3; wave 3 = 4: every start of a wave comes after every
    # end of the previous one.
    assert max(ends[:2]) < min(starts[2:4])
    assert max(ends[2:4]) < starts[4]


async def test_cpu_budget_limits_parallel_worker_sets() -> None:
    recorder = await run("parallel", 6, None, cpus=2)
    assert recorder.peak == 2


async def test_unroll_groups_run_in_turn() -> None:
    recorder = await run("parallel", 6, None, groups=2)
    order = [name for kind, name in recorder.events if kind == "start"]
    first_group = {"w0", "w2", "w4"}
    assert set(order[:3]) == first_group
    last_end_of_first = max(i for i, e in enumerate(recorder.events) if e == ("end", "w4"))
    first_start_of_second = min(
        i for i, e in enumerate(recorder.events) if e[0] == "start" and e[1] not in first_group
    )
    assert last_end_of_first < first_start_of_second


async def test_stop_prevents_new_worker_sets() -> None:
    stop = asyncio.Event()
    started: list[str] = []

    async def run_worker_set(worker_set: WorkerSet) -> None:
        started.append(worker_set.name)
        stop.set()

    await run_worker_sets(
        worker_sets(4), Execution(strategy="sequential"), 8, lambda _j: 1.0, run_worker_set, stop
    )
    assert started == ["w0"]
