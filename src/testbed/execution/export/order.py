"""The order of an exported pipeline: one task per planned treatment, with the execution
strategy written as dependencies, since an in-cluster engine has no CPU budget to consult.

- ``sequential``: a chain, each task after the one before;
- ``sliding`` (and ``parallel`` with ``max_parallel``): task *i* after task *i − n*, so at
  most *n* run at once and the next starts as soon as its predecessor in the window ends;
- ``barrier``: waves of *n*; every task of a wave after every task of the wave before;
- ``parallel`` without a limit: no dependency inside a group.

``unroll`` factors split the plan into groups run one after the other: the first tasks of a
group wait for the last tasks (the sinks) of the group before. Tasks that deploy the same
stack take turns (:func:`stacks_take_turns`), as its workers do inside one ``testbed run``:
they share one namespace, and a stack's objects have fixed names. Pure functions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from testbed.config.execution import Execution
from testbed.config.stacks import StackDeployment
from testbed.plan.model import Plan, Treatment


@dataclass
class Task:
    """One exported task: a treatment and the tasks it must wait for."""

    name: str
    treatment: Treatment
    after: list[str] = field(default_factory=list)


def task_name(treatment: Treatment) -> str:
    """A DNS-1123 label (Tekton and Argo both require one), readable and unique."""
    return f"t{treatment.index:03d}-{treatment.id}".lower()


def ordered_tasks(plan: Plan, execution: Execution) -> list[Task]:
    """The planned treatments as tasks, in plan order, with their dependencies."""
    groups: dict[tuple[Any, ...], list[Treatment]] = {}
    for treatment in sorted(plan.planned(), key=lambda t: t.index):
        key = tuple(repr(treatment.params.get(factor)) for factor in execution.unroll)
        groups.setdefault(key, []).append(treatment)
    tasks: list[Task] = []
    previous_sinks: list[str] = []
    for members in groups.values():
        group = [Task(task_name(t), t) for t in members]
        _within(group, execution)
        for task in group:
            if not task.after:
                task.after = list(previous_sinks)
        depended = {name for task in group for name in task.after}
        previous_sinks = [task.name for task in group if task.name not in depended]
        tasks.extend(group)
    return tasks


def _within(group: list[Task], execution: Execution) -> None:
    strategy, width = execution.strategy, execution.max_parallel
    if strategy == "sequential":
        width = 1
    if strategy == "barrier":
        size = width or 1
        for start in range(size, len(group), size):
            wave = [task.name for task in group[start - size : start]]
            for task in group[start : start + size]:
                task.after = list(wave)
        return
    if strategy == "parallel" and width is None:
        return
    size = width or 1
    for i in range(size, len(group)):
        group[i].after = [group[i - size].name]


def stacks_take_turns(tasks: list[Task], plan: Plan) -> None:
    """Each task that deploys a stack also waits for the task before it deploying the same
    stack (by deployment name), unless it already does."""
    last: dict[str, str] = {}
    for task in tasks:
        for worker in task.treatment.workers:
            config = plan.workers[worker].config
            if not isinstance(config, StackDeployment):
                continue
            before = last.get(config.name)
            if before is not None and before not in task.after:
                task.after.append(before)
            last[config.name] = task.name
