"""Watching a stack worker's objects: until they are ready, then while they serve.

:func:`wait_ready` watches every ``ready`` entry of the stack at once, each until its kind's
reading (:mod:`rollout`) says ready, with its own timeout; a pod of the worker that will not
start ends the wait at once in its own words (:mod:`stack_pods`). :func:`watch_serving`
keeps watching them while the probes run and resolves ``died`` when one fails or is
deleted. :func:`watch_until` is the one wait on one object, also used for a CRD to be
Established. Everything is by WATCH (``Changes``), never by polling.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from testbed.backends.kubernetes import conditions, rollout, stack_pods
from testbed.backends.kubernetes.stack_render import StackObject
from testbed.clients.kube import Changes, Kube
from testbed.clients.kube.rest import KindInfo
from testbed.config.stacks import ReadyCondition, StackDeployment
from testbed.core.errors import ServerStartError

#: What a stack worker applied: each object with the resource discovery found for it.
Placed = Sequence[tuple[StackObject, KindInfo]]


def _ready_objects(
    deployment: StackDeployment, placed: Placed, namespace: str
) -> Iterator[tuple[ReadyCondition, KindInfo, str | None]]:
    """Each ``ready`` entry with its object's resource and namespace (None: cluster-scoped);
    an object without a namespace is in the run's (``namespace``)."""
    for entry in deployment.ready:
        item, info = next(
            (o, i) for o, i in placed if o.kind == entry.kind and o.name == entry.name
        )
        where = (item.obj.get("metadata") or {}).get("namespace") or namespace
        yield entry, info, where if info.namespaced else None


async def wait_ready(
    kube: Kube, namespace: str, selector: str, deployment: StackDeployment, placed: Placed
) -> None:
    """Every ``ready`` entry at once; the first failure ends the wait. ``selector``: the
    worker's labels (not managed-by: Helm's stays)."""
    waits = []
    for entry, info, where in _ready_objects(deployment, placed, namespace):
        check, what = rollout.check_for(entry)
        timeout = entry.timeout_s or deployment.startup_timeout_s
        waits.append(
            watch_until(kube, info, where, entry.name, selector, check, timeout, what, namespace)
        )
    try:
        async with asyncio.TaskGroup() as group:
            # a pod that will not start ends the wait at once, in its own words
            pods = group.create_task(stack_pods.fail_fast(kube, namespace, selector))
            await asyncio.gather(*(group.create_task(w) for w in waits))
            pods.cancel()
    except* ServerStartError as failed:
        raise failed.exceptions[0] from None


async def watch_serving(
    kube: Kube,
    namespace: str,
    selector: str,
    deployment: StackDeployment,
    placed: Placed,
    died: asyncio.Future[str],
) -> None:
    """Resolve ``died`` when an object of ``ready`` fails or is deleted while the stack
    serves (the ERROR's reason is the object's own words)."""
    async with asyncio.TaskGroup() as group:
        for entry, info, where in _ready_objects(deployment, placed, namespace):
            group.create_task(_watch_one(kube, entry, info, where, selector, died))


async def _watch_one(
    kube: Kube,
    entry: ReadyCondition,
    info: KindInfo,
    namespace: str | None,
    selector: str,
    died: asyncio.Future[str],
) -> None:
    changes = Changes(kube, info, namespace, selector)
    try:
        async for event, obj in changes:
            if obj["metadata"].get("name") != entry.name:
                continue
            why = "was deleted"
            if event != "DELETED":
                reading = rollout.check_for(entry)[0](obj)
                if reading.state != "failed":
                    continue
                why = f"failed: {reading.why}"
            if not died.done():
                died.set_result(f"{entry.kind}/{entry.name} {why} while serving")
            return
    finally:
        changes.close()


async def watch_until(
    kube: Kube,
    info: KindInfo,
    namespace: str | None,
    name: str,
    selector: str | None,
    check: Any,
    timeout_s: float,
    what: str,
    pods_in: str | None = None,
) -> dict[str, Any]:
    """Watch object ``name`` until ``check`` reads it ``ready`` (returned); ServerStartError
    with the object's own state when it reads ``failed`` or the time runs out (and, given
    ``pods_in``, where the ``selector``'s pods of that namespace stand)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    changes = Changes(kube, info, namespace, selector)
    last: dict[str, Any] | None = None
    reading: conditions.Reading | None = None
    try:
        while (remaining := deadline - loop.time()) > 0:
            event = await changes.next(remaining)
            if event is None or event[1]["metadata"].get("name") != name:
                continue
            kind, last = event
            if kind == "DELETED":
                raise ServerStartError(f"waiting for {what}: it was deleted")
            reading = check(last)
            if reading.state == "ready":
                return last
            if reading.state == "failed":
                raise ServerStartError(f"waiting for {what}: {reading.why}")
    finally:
        changes.close()
    state = "it does not exist"
    if last is not None:
        state = f"its conditions: {conditions.describe(last)}"
        if reading is not None and reading.why and reading.why != conditions.describe(last):
            state = f"{reading.why}; {state}"  # what its kind publishes: counts, revisions
    seen = ""
    if namespace is not None:
        with contextlib.suppress(Exception):  # the events are evidence, not a requirement
            notes = await asyncio.to_thread(kube.warnings, namespace, name)
            seen = f"; the cluster's last warnings: {'; '.join(notes)}" if notes else ""
    if pods_in is not None and selector is not None:
        seen += await asyncio.to_thread(stack_pods.describe_pods, kube, pods_in, selector)
    raise ServerStartError(
        f"timeout: waited {timeout_s:.0f} s for {what} (ready[].timeout_s or"
        f" startup_timeout_s); {state}{seen}"
    )
