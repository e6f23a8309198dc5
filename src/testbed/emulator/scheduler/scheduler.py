"""The scheduler: binds pending pods to nodes by requests and constraints, or says why not.

It watches nodes and pods, keeps every node's free capacity in a :class:`CapacityIndex`,
and runs scheduling passes over the pods waiting to be placed. A pod that fits nowhere gets
``PodScheduled=False`` (reason ``Unschedulable``, the real scheduler's message) and a
``FailedScheduling`` event, and is parked until capacity changes (a node added or changed,
a pod deleted or finished); then every parked pod is tried again. A burst of events wakes
one pass, and a pass costs O(pods × kinds of node), not O(pods × nodes).

The ``slow-schedule`` fault (``machinery.faults``) holds a pod back for its delay first.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from testbed.core.clock import monotonic_ns
from testbed.core.errors import InputError
from testbed.core.kube.fit import HOSTNAME, NodeFacts, PodFacts
from testbed.emulator.machinery import events
from testbed.emulator.machinery.faults import FaultRule, fault_of
from testbed.emulator.scheduler.capacity import CapacityIndex
from testbed.emulator.storage.errors import ApiError
from testbed.emulator.storage.meta import now
from testbed.emulator.storage.watchers import DELETED

if TYPE_CHECKING:
    from testbed.emulator.storage.store import Store

SCHEDULER = "default-scheduler"
_TERMINAL = ("Succeeded", "Failed")
#: Yield to the event loop after this many pods so the API stays responsive during a storm.
_BATCH = 200


class Scheduler:
    """The default scheduler of the emulated cluster."""

    def __init__(self, store: Store, fault_rules: tuple[FaultRule, ...] = ()) -> None:
        self.store = store
        self.fault_rules = fault_rules
        self.index = CapacityIndex()
        self._used: dict[str, dict[str, int]] = {}
        self._bound: dict[str, tuple[str, tuple[tuple[str, int], ...]]] = {}
        self._active: dict[str, tuple[str, str]] = {}
        self._parked: dict[str, tuple[str, str]] = {}
        self._messages: dict[str, str] = {}
        self._not_before: dict[str, int] = {}
        self._wake = asyncio.Event()

    async def run(self) -> None:
        """Serve until cancelled."""
        nodes = self.store.watch("nodes")
        pods = self.store.watch("pods")
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self._follow_nodes(nodes))
                group.create_task(self._follow_pods(pods))
                group.create_task(self._passes())
        finally:
            nodes.close()
            pods.close()

    async def _follow_nodes(self, watch: Any) -> None:
        async for event in watch:
            name = event.object["metadata"]["name"]
            if event.type == DELETED:
                self.index.remove_node(name)
            else:
                labels = event.object["metadata"].get("labels") or {}
                self.index.set_node(
                    name,
                    NodeFacts.of(event.object),
                    self._used.get(name, {}),
                    labels.get(HOSTNAME, name),
                )
            self._capacity_changed()

    async def _follow_pods(self, watch: Any) -> None:
        async for event in watch:
            self.on_pod(event.type, event.object)

    def on_pod(self, kind: str, pod: Mapping[str, Any]) -> None:
        """Account for one pod change (public for tests that drive the scheduler directly)."""
        meta, spec = pod["metadata"], pod.get("spec") or {}
        uid = str(meta["uid"])
        phase = (pod.get("status") or {}).get("phase")
        if kind == DELETED or phase in _TERMINAL:
            self._forget(uid)
            return
        node = spec.get("nodeName")
        if uid in self._bound and not node:
            return  # our own binding, not yet visible in this event
        if node:
            self._active.pop(uid, None)
            self._parked.pop(uid, None)
            if uid not in self._bound:
                self._reserve(uid, str(node), PodFacts.of(pod).requests)
            return
        if spec.get("schedulerName", SCHEDULER) != SCHEDULER or meta.get("deletionTimestamp"):
            return
        if uid not in self._active and uid not in self._parked:
            self._active[uid] = (str(meta.get("namespace")), str(meta["name"]))
            self._wake.set()

    def _forget(self, uid: str) -> None:
        self._active.pop(uid, None)
        self._parked.pop(uid, None)
        self._messages.pop(uid, None)
        self._not_before.pop(uid, None)
        bound = self._bound.pop(uid, None)
        if bound is not None:
            node, requests = bound
            self.index.release(node, requests)
            used = self._used.setdefault(node, {})
            for res, value in requests:
                used[res] = used.get(res, 0) - value
            self._capacity_changed()

    def _reserve(self, uid: str, node: str, requests: tuple[tuple[str, int], ...]) -> None:
        self._bound[uid] = (node, requests)
        self.index.reserve(node, requests)
        used = self._used.setdefault(node, {})
        for res, value in requests:
            used[res] = used.get(res, 0) + value

    def _capacity_changed(self) -> None:
        if self._parked:
            self._active.update(self._parked)
            self._parked.clear()
        self._wake.set()

    async def _passes(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self.schedule_pass()

    async def schedule_pass(self) -> None:
        """Try every active pod once, in arrival order."""
        done = 0
        for uid, (namespace, name) in list(self._active.items()):
            if uid not in self._active:
                continue
            self._try(uid, namespace, name)
            done += 1
            if done % _BATCH == 0:
                await asyncio.sleep(0)

    def _try(self, uid: str, namespace: str, name: str) -> None:
        pod = self.store.try_get("pods", namespace, name)
        if pod is None or pod["metadata"]["uid"] != uid or (pod.get("spec") or {}).get("nodeName"):
            self._active.pop(uid, None)
            return
        if self._held_back(uid, pod):
            return
        facts = PodFacts.of(pod)
        node = self.index.place(facts)
        if node is not None:
            self._bind(uid, pod, node, facts)
            return
        self._active.pop(uid, None)
        self._parked[uid] = (namespace, name)
        message = self.index.diagnose(facts)
        if self._messages.get(uid) != message:
            self._messages[uid] = message
            self._unschedulable(pod, message)

    def _held_back(self, uid: str, pod: Mapping[str, Any]) -> bool:
        """The slow-schedule fault: wait its delay from the first time the pod was seen."""
        try:
            fault = fault_of(pod, self.fault_rules)
        except InputError:
            fault = None
        if fault is None or fault.kind != "slow-schedule":
            return False
        start = self._not_before.setdefault(uid, monotonic_ns() + int(fault.seconds * 1e9))
        remaining = (start - monotonic_ns()) / 1e9
        if remaining <= 0:
            return False
        asyncio.get_running_loop().call_later(remaining, self._wake.set)
        return True

    def _bind(self, uid: str, pod: Mapping[str, Any], node: str, facts: PodFacts) -> None:
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        self._active.pop(uid, None)
        self._messages.pop(uid, None)
        self._reserve(uid, node, facts.requests)

        def assign(draft: dict[str, Any]) -> None:
            draft["spec"]["nodeName"] = node

        def scheduled(draft: dict[str, Any]) -> None:
            _set_condition(draft, {"type": "PodScheduled", "status": "True"})

        try:
            self.store.mutate("pods", namespace, name, scheduled, subresource="status")
            bound = self.store.mutate("pods", namespace, name, assign)
        except ApiError:
            self._forget(uid)
            return
        note = f"Successfully assigned {namespace}/{name} to {node}"
        events.record(self.store, bound, "Normal", "Scheduled", note, SCHEDULER)

    def _unschedulable(self, pod: Mapping[str, Any], message: str) -> None:
        def mark(draft: dict[str, Any]) -> None:
            _set_condition(
                draft,
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": message,
                },
            )

        meta = pod["metadata"]
        with contextlib.suppress(ApiError):
            pod = self.store.mutate("pods", meta["namespace"], meta["name"], mark, "status")
        events.record(self.store, pod, "Warning", "FailedScheduling", message, SCHEDULER)


def _set_condition(pod: dict[str, Any], condition: dict[str, Any]) -> None:
    status = pod.setdefault("status", {})
    status.setdefault("phase", "Pending")
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != condition["type"]]
    old = next(
        (c for c in status.get("conditions") or [] if c.get("type") == condition["type"]), None
    )
    same = old is not None and old.get("status") == condition["status"]
    stamp = old.get("lastTransitionTime") if same and old else now()
    conditions.append({**condition, "lastProbeTime": None, "lastTransitionTime": stamp})
    status["conditions"] = conditions
