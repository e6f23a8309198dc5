"""Worker sets: workers that must be up together, with the treatments they serve.

Workers joined by an A/B treatment form one worker set (both must serve at once); unroll
factors split a worker set into one per value combination, run in turn. Pure functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from testbed.plan.model import Plan, Treatment


@dataclass
class WorkerSet:
    """Workers provisioned together and the treatments they run, in plan order."""

    workers: tuple[str, ...]
    treatments: list[Treatment] = field(default_factory=list)
    group: tuple[Any, ...] = ()  # the unroll factor values

    @property
    def name(self) -> str:
        return "+".join(self.workers) or "cluster"


def make_worker_sets(
    plan: Plan, todo: Iterable[Treatment], unroll: Sequence[str] = ()
) -> list[WorkerSet]:
    """Group ``todo`` into worker sets, ordered by their first treatment."""
    parent: dict[str, str] = {}

    def find(worker: str) -> str:
        while parent.setdefault(worker, worker) != worker:
            parent[worker] = parent[parent[worker]]
            worker = parent[worker]
        return worker

    todo = list(todo)
    for treatment in todo:
        for other in treatment.workers[1:]:
            parent[find(other)] = find(treatment.workers[0])
    members: dict[str, list[str]] = {}
    for worker in plan.workers:
        members.setdefault(find(worker), []).append(worker)
    worker_sets: dict[tuple[Any, ...], WorkerSet] = {}
    for treatment in sorted(todo, key=lambda t: t.index):
        root = find(treatment.workers[0]) if treatment.workers else ""
        group = tuple(_level(treatment.params.get(f)) for f in unroll)
        key = (root, group)
        if key not in worker_sets:
            worker_sets[key] = WorkerSet(tuple(members.get(root, [])), group=group)
        worker_sets[key].treatments.append(treatment)
    return list(worker_sets.values())


def _level(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool | None) else repr(value)


def unroll_groups(worker_sets: list[WorkerSet]) -> list[list[WorkerSet]]:
    """Worker sets split by their unroll values, groups in order of first appearance."""
    groups: dict[tuple[Any, ...], list[WorkerSet]] = {}
    for worker_set in worker_sets:
        groups.setdefault(worker_set.group, []).append(worker_set)
    return list(groups.values())
