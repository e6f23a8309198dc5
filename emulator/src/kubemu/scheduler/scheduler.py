"""The scheduler: binds pending pods to nodes by requests and constraints, or says why not.

It watches nodes and pods, keeps every node's free capacity in a :class:`CapacityIndex`,
and runs scheduling passes over the pods waiting to be placed, highest priority first
(then in arrival order). A pod that fits nowhere gets ``PodScheduled=False`` (reason
``Unschedulable``, the real scheduler's message) and a ``FailedScheduling`` event, and is
parked until capacity changes (a node added or changed, a pod deleted or finished); then
every parked pod is tried again. A burst of events wakes one pass, and a pass costs
O(pods × kinds of node), not O(pods × nodes).

Gangs (:mod:`~kubemu.machinery.podgroups`): the pods of a PodGroup are placed
together — once ``minMember`` of them exist and that many fit at once, they are bound in one
resourceVersion; otherwise none is, and each waits with coscheduling's message.
Preemption (:mod:`.preemption`): a pod (or a whole gang) that fits nowhere evicts pods of
lower priority from one node, unless its ``preemptionPolicy`` is ``Never``; it waits,
nominated to that node, until its victims are gone.

The ``slow-schedule`` fault (``machinery.faults``) holds a pod back for its delay first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from time import perf_counter_ns as monotonic_ns
from typing import TYPE_CHECKING, Any

from kubefacts.errors import InputError
from kubefacts.fit import HOSTNAME, NodeFacts, PodFacts
from kubemu.machinery import podgroups
from kubemu.machinery.faults import FaultRule, fault_of
from kubemu.machinery.podgroups import GroupKey
from kubemu.scheduler import preemption, writes
from kubemu.scheduler.capacity import CapacityIndex
from kubemu.scheduler.known import KnownPods
from kubemu.storage.errors import ApiError
from kubemu.storage.watchers import DELETED

if TYPE_CHECKING:
    from kubemu.storage.store import Store

SCHEDULER = writes.SCHEDULER
_TERMINAL = ("Succeeded", "Failed")
#: Yield to the event loop after this many pods so the API stays responsive during a storm.
_BATCH = 200
Pending = tuple[str, Mapping[str, Any], PodFacts]  # (uid, pod, facts)


class Scheduler:
    """The default scheduler of the emulated cluster (with coscheduling and preemption)."""

    def __init__(self, store: Store, fault_rules: tuple[FaultRule, ...] = ()) -> None:
        self.store = store
        self.fault_rules = fault_rules
        self.index = CapacityIndex()
        podgroups.install(store)
        self.known = KnownPods(self.index)
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
                    self.known.used.get(name, {}),
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
        self.known.learn(uid, pod)
        node = spec.get("nodeName")
        if node and meta.get("deletionTimestamp"):
            self.known.terminating.add(uid)
        if uid in self.known.bound and not node:
            return  # our own binding, not yet visible in this event
        if node:
            self._active.pop(uid, None)
            self._parked.pop(uid, None)
            if uid not in self.known.bound:
                self.known.reserve(uid, str(node), PodFacts.of(pod).requests)
            return
        if spec.get("schedulerName", SCHEDULER) != SCHEDULER or meta.get("deletionTimestamp"):
            return
        if uid not in self._active and uid not in self._parked:
            self._active[uid] = (str(meta.get("namespace")), str(meta["name"]))
            if uid in self.known.group:
                self._wake_gang(self.known.group[uid])  # a new member may complete its gang
            self._wake.set()

    def _forget(self, uid: str) -> None:
        self._active.pop(uid, None)
        self._parked.pop(uid, None)
        self._messages.pop(uid, None)
        self._not_before.pop(uid, None)
        if self.known.forget(uid):
            self._capacity_changed()

    def _capacity_changed(self) -> None:
        if self._parked:
            self._active.update(self._parked)
            self._parked.clear()
        self._wake.set()

    def _wake_gang(self, group: GroupKey) -> None:
        for uid in self.known.members.get(group, ()):
            where = self._parked.pop(uid, None)
            if where is not None:
                self._active[uid] = where

    async def _passes(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self.schedule_pass()

    async def schedule_pass(self) -> None:
        """Try every active pod once: highest priority first, then in arrival order."""
        done = 0
        order = sorted(self._active, key=lambda u: -self.known.priority.get(u, 0))
        for uid in order:
            where = self._active.get(uid)
            if where is None:
                continue
            self._try(uid, *where)
            done += 1
            if done % _BATCH == 0:
                await asyncio.sleep(0)

    def _try(self, uid: str, namespace: str, name: str) -> None:
        pod = self._current(uid, namespace, name)
        if pod is None or self._held_back(uid, pod):
            return
        group = self.known.group.get(uid)
        if group is not None:
            self._try_gang(group)
            return
        facts = PodFacts.of(pod)
        node = self.index.place(facts)
        if node is not None:
            self._bind(uid, pod, node, facts)
            return
        self._park(uid)
        if (pod.get("spec") or {}).get("preemptionPolicy") == "Never":
            never = " preemption: not eligible due to preemptionPolicy=Never."
            self._note(uid, pod, self._head(facts) + never)
        elif self._preempt([(uid, pod, facts)]):
            self._note(uid, pod, self._head(facts))
        else:
            self._note(uid, pod, self.index.diagnose(facts))

    def _current(self, uid: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        pod = self.store.try_get("pods", namespace, name)
        if pod is None or pod["metadata"]["uid"] != uid or (pod.get("spec") or {}).get("nodeName"):
            self._active.pop(uid, None)
            return None
        return pod

    def _park(self, uid: str) -> None:
        where = self._active.pop(uid, None) or self._parked.get(uid)
        if where is not None:
            self._parked[uid] = where

    def _note(self, uid: str, pod: Mapping[str, Any], message: str) -> None:
        if self._messages.get(uid) != message:
            self._messages[uid] = message
            writes.unschedulable(self.store, pod, message)

    def _head(self, facts: PodFacts) -> str:
        """The FitError without its preemption part (preemption found victims)."""
        return self.index.diagnose(facts).split(" preemption: ", 1)[0]

    # -- gangs -----------------------------------------------------------------------------

    def _try_gang(self, group: GroupKey) -> None:
        namespace, name = group
        pending = self._pending_members(group)
        if not pending:
            return
        found = self.store.try_get(podgroups.KEY, namespace, name)
        if found is None:
            for uid, pod, _ in pending:
                self._note(uid, pod, "PodGroup not found")
            return
        wanted = podgroups.min_member(found)
        members = len(self.known.members.get(group, ()))
        if members < wanted:
            for uid, pod, _ in pending:
                self._note(
                    uid, pod, writes.too_few(len(self.index.nodes), group, pod, members, wanted)
                )
            return
        placed, failed = self._place_together(pending)
        bound = members - len(pending)
        if failed is None or bound + len(placed) >= wanted:
            self._bind_gang(placed)
            if failed is None:
                return
            pending = [p for p in pending if p[0] not in {uid for uid, _, _, _ in placed}]
        facts = failed[2]
        message = self._head(facts) if self._preempt(pending) else self.index.diagnose(facts)
        message += writes.rejected(group, failed[1])
        for uid, pod, _ in pending:
            self._note(uid, pod, message)

    def _pending_members(self, group: GroupKey) -> list[Pending]:
        """The gang's members waiting for a node, by name; all parked until placed."""
        pending: list[Pending] = []
        for uid in sorted(self.known.members.get(group, ()), key=lambda u: self.known.where[u][1]):
            where = self._active.get(uid) or self._parked.get(uid)
            if where is None or uid in self.known.bound:
                continue
            pod = self._current(uid, *where)
            if pod is not None:
                pending.append((uid, pod, PodFacts.of(pod)))
            self._park(uid)
        return pending

    def _place_together(
        self, pending: list[Pending]
    ) -> tuple[list[tuple[str, Mapping[str, Any], str, PodFacts]], Pending | None]:
        """Where each pending member would go with its siblings placed before it (nothing is
        reserved afterwards), and the first that fits nowhere."""
        placed: list[tuple[str, Mapping[str, Any], str, PodFacts]] = []
        failed: Pending | None = None
        for uid, pod, facts in pending:
            node = self.index.place(facts)
            if node is None:
                failed = failed or (uid, pod, facts)
                continue
            self.index.reserve(node, facts.requests)
            placed.append((uid, pod, node, facts))
        for _, _, node, facts in placed:
            self.index.release(node, facts.requests)
        return placed, failed

    def _bind_gang(self, placed: list[tuple[str, Mapping[str, Any], str, PodFacts]]) -> None:
        for uid, _, node, facts in placed:
            self._active.pop(uid, None)
            self._parked.pop(uid, None)
            self._messages.pop(uid, None)
            self.known.reserve(uid, node, facts.requests)
        gone = writes.bind_gang(self.store, [(pod, node) for _, pod, node, _ in placed])
        for uid, pod, _, _ in placed:
            if pod["metadata"]["name"] in gone:
                self._forget(uid)

    # -- preemption -------------------------------------------------------------------------

    def _preempt(self, pending: list[Pending]) -> bool:
        """Evict lower-priority pods so every pod of ``pending`` fits; True when it did (or
        victims evicted for them earlier are still leaving)."""
        if not pending:
            return False
        uid0, pod0, _ = pending[0]
        if any(
            self.known.waiting_on.get(uid, set()) & self.known.bound.keys() for uid, _, _ in pending
        ):
            return True
        if (pod0.get("spec") or {}).get("preemptionPolicy") == "Never":
            return False
        priority = self.known.priority.get(uid0, 0)
        if not any(self.known.priority.get(u, 0) < priority for u in self.known.bound):
            return False  # nothing of lower priority runs: no node search
        victims: dict[str, preemption.Victim] = {}
        nominated: list[tuple[str, Mapping[str, Any], str]] = []
        held: list[tuple[str, tuple[tuple[str, int], ...]]] = []
        ok = True
        for uid, pod, facts in pending:
            node = self.index.place(facts)
            if node is None:
                choice = preemption.pick(
                    self.index, facts, priority, self.known.candidates(victims)
                )
                if choice is None:
                    ok = False
                    break
                node, chosen = choice
                for victim in chosen:
                    victims[victim.uid] = victim
                    self.index.release(victim.node, victim.requests)
                nominated.append((uid, pod, node))
            self.index.reserve(node, facts.requests)
            held.append((node, facts.requests))
        for node, requests in held:
            self.index.release(node, requests)
        for victim in victims.values():
            self.index.reserve(victim.node, victim.requests)
        if not ok or not victims:
            return False
        self._evict(victims, nominated)
        for uid, _, _ in pending:
            self.known.waiting_on[uid] = set(victims)
        return True

    def _evict(
        self,
        victims: Mapping[str, preemption.Victim],
        nominated: list[tuple[str, Mapping[str, Any], str]],
    ) -> None:
        preemptor_uid, _, node = nominated[0]
        for uid in victims:
            where = self.known.where.get(uid)
            victim = self.store.try_get("pods", *where) if where else None
            if victim is not None and victim["metadata"]["uid"] == uid:
                self.known.terminating.add(uid)
                writes.evict(self.store, victim, preemptor_uid, node)
        for _, pod, chosen in nominated:
            writes.nominate(self.store, pod, chosen)

    # -- single pods ------------------------------------------------------------------------

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
        self._active.pop(uid, None)
        self._messages.pop(uid, None)
        self.known.reserve(uid, node, facts.requests)
        try:
            writes.bind(self.store, pod, node)
        except ApiError:
            self._forget(uid)
