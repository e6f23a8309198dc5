"""Parallelism strategies (Tekton seed) within a CPU budget and the workers' own GPUs.

``parallel`` starts every worker set at once, ``sequential`` one at a time, ``sliding`` keeps
``max_parallel`` running and starts the next when one ends, ``barrier`` runs waves of
``max_parallel`` that all end before the next wave starts. Every strategy also respects the
CPU budget: the sum of running worker sets' ``resources.cpu`` stays within it (a worker set
larger than the whole budget runs alone), and two worker sets holding a common device (the
GPUs the backend gave their workers) never run at once. Unroll groups run one after the other.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from testbed.config.execution import Execution
from testbed.execution.grouping import WorkerSet, unroll_groups


class Budget:
    """A weighted semaphore: a slot count, a CPU total and devices held one at a time."""

    def __init__(self, slots: int, cpus: float) -> None:
        self.slots, self.cpus = slots, cpus
        self._used_slots, self._used_cpus = 0, 0.0
        self._held: set[int] = set()
        self._changed = asyncio.Condition()

    async def acquire(self, cost: float, devices: frozenset[int] = frozenset()) -> float:
        cost = min(cost, self.cpus)  # a worker set larger than the budget runs alone
        async with self._changed:
            await self._changed.wait_for(
                lambda: (
                    self._used_slots < self.slots
                    and self._used_cpus + cost <= self.cpus + 1e-9
                    and not devices & self._held
                )
            )
            self._used_slots += 1
            self._used_cpus += cost
            self._held |= devices
        return cost

    async def release(self, cost: float, devices: frozenset[int] = frozenset()) -> None:
        async with self._changed:
            self._used_slots -= 1
            self._used_cpus -= cost
            self._held -= devices
            self._changed.notify_all()


async def run_worker_sets(
    worker_sets: list[WorkerSet],
    execution: Execution,
    cpu_budget: float,
    cost: Callable[[WorkerSet], float],
    run_worker_set: Callable[[WorkerSet], Awaitable[None]],
    stop: asyncio.Event,
    devices: Callable[[WorkerSet], frozenset[int]] = lambda _ws: frozenset(),
) -> None:
    """Run ``worker_sets`` as the strategy says; stop starting new ones once ``stop`` is set.
    ``devices`` names what a worker set holds alone while it runs (its workers' GPUs)."""
    width = {
        "sequential": 1,
        "parallel": execution.max_parallel or max(len(worker_sets), 1),
        "sliding": execution.max_parallel or 1,
        "barrier": execution.max_parallel or 1,
    }[execution.strategy]
    for group in unroll_groups(worker_sets):
        waves = (
            [group[i : i + width] for i in range(0, len(group), width)]
            if execution.strategy == "barrier"
            else [group]
        )
        for wave in waves:
            if stop.is_set():
                return
            budget = Budget(width, cpu_budget)

            async def guarded(worker_set: WorkerSet, budget: Budget = budget) -> None:
                held = devices(worker_set)
                taken = await budget.acquire(cost(worker_set), held)
                try:
                    if not stop.is_set():
                        await run_worker_set(worker_set)
                finally:
                    await budget.release(taken, held)

            async with asyncio.TaskGroup() as tasks:
                for worker_set in wave:
                    tasks.create_task(guarded(worker_set))
