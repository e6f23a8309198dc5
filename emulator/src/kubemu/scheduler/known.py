"""What the scheduler knows of every live pod: where it is, its priority and gang, and what
each bound pod holds on its node.

The scheduler's queues (:mod:`.scheduler`) decide; this book answers them. A bound pod's
requests are kept here and mirrored into the :class:`~.capacity.CapacityIndex`, so a pod
that goes away gives its node's capacity back once, and preemption reads its candidate
victims (priority, node, gang) from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubemu.machinery import podgroups
from kubemu.machinery.podgroups import GroupKey
from kubemu.scheduler import preemption
from kubemu.scheduler.capacity import CapacityIndex

Requests = tuple[tuple[str, int], ...]


class KnownPods:
    """The scheduler's book of live pods (keyed by uid)."""

    def __init__(self, index: CapacityIndex) -> None:
        self.index = index
        #: Requests bound to each node, by resource.
        self.used: dict[str, dict[str, int]] = {}
        #: A bound pod → its node and requests.
        self.bound: dict[str, tuple[str, Requests]] = {}
        #: Every live pod we know: where it is (namespace, name), its priority and gang.
        self.where: dict[str, tuple[str, str]] = {}
        self.priority: dict[str, int] = {}
        self.group: dict[str, GroupKey] = {}
        self.members: dict[GroupKey, set[str]] = {}
        self.terminating: set[str] = set()
        #: A nominated preemptor → the victims it waits for.
        self.waiting_on: dict[str, set[str]] = {}

    def learn(self, uid: str, pod: Mapping[str, Any]) -> None:
        """Note a pod seen for the first time (later events change none of this)."""
        if uid in self.where:
            return
        meta = pod["metadata"]
        self.where[uid] = (str(meta.get("namespace")), str(meta["name"]))
        self.priority[uid] = int((pod.get("spec") or {}).get("priority") or 0)
        group = podgroups.group_of(pod)
        if group is not None:
            self.group[uid] = group
            self.members.setdefault(group, set()).add(uid)

    def reserve(self, uid: str, node: str, requests: Requests) -> None:
        """The pod ``uid`` is bound to ``node``: its requests are taken there."""
        self.bound[uid] = (node, requests)
        self.index.reserve(node, requests)
        used = self.used.setdefault(node, {})
        for res, value in requests:
            used[res] = used.get(res, 0) + value

    def forget(self, uid: str) -> bool:
        """Drop a pod gone or finished; True when it gave capacity back (it was bound)."""
        self.where.pop(uid, None)
        self.priority.pop(uid, None)
        self.terminating.discard(uid)
        self.waiting_on.pop(uid, None)
        group = self.group.pop(uid, None)
        if group is not None:
            members = self.members.get(group, set())
            members.discard(uid)
            if not members:
                self.members.pop(group, None)
        bound = self.bound.pop(uid, None)
        if bound is not None:
            node, requests = bound
            self.index.release(node, requests)
            used = self.used.setdefault(node, {})
            for res, value in requests:
                used[res] = used.get(res, 0) - value
        return bound is not None

    def candidates(self, taken: Mapping[str, preemption.Victim]) -> list[preemption.Victim]:
        """Bound pods preemption may evict: not already ``taken``, not already terminating."""
        out = []
        for uid, (node, requests) in self.bound.items():
            if uid in taken or uid in self.terminating:
                continue
            group = self.group.get(uid)
            unit = f"gang:{group[0]}/{group[1]}" if group else uid
            out.append(preemption.Victim(uid, node, requests, self.priority.get(uid, 0), unit))
        return out
