"""What the scheduler writes: bindings, the unschedulable condition, evictions, nominations.

Each function is one API-visible act with the real scheduler's words: ``Scheduled`` and
``FailedScheduling`` events, ``PodScheduled`` conditions, and for preemption the victim's
``DisruptionTarget`` condition (reason ``PreemptionByScheduler``), its ``Preempted`` event
("Preempted by pod <uid> on node <node>") and the preemptor's ``status.nominatedNodeName``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kubemu.machinery import events
from kubemu.storage.errors import ApiError
from kubemu.storage.meta import now

if TYPE_CHECKING:
    from kubemu.storage.store import Store

SCHEDULER = "default-scheduler"


def bind(store: Store, pod: Mapping[str, Any], node: str) -> Mapping[str, Any]:
    """Condition first, then ``spec.nodeName`` (two writes, as the scheduler's status
    update and binding are); raises ApiError when the pod is gone."""
    namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]

    def assign(draft: dict[str, Any]) -> None:
        draft["spec"]["nodeName"] = node

    def scheduled(draft: dict[str, Any]) -> None:
        set_condition(draft, {"type": "PodScheduled", "status": "True"})

    store.mutate("pods", namespace, name, scheduled, subresource="status")
    bound = store.mutate("pods", namespace, name, assign)
    announce(store, bound, node)
    return bound


def bind_gang(store: Store, placed: Sequence[tuple[Mapping[str, Any], str]]) -> list[str]:
    """Bind every (pod, node) in one resourceVersion (one write per pod: node and condition,
    as the binding subresource writes them together); the names of pods that were gone."""
    done: list[tuple[Mapping[str, Any], str]] = []
    gone: list[str] = []
    with store.one_version():
        for pod, node in placed:
            meta = pod["metadata"]
            current = store.try_get("pods", meta["namespace"], meta["name"])
            if current is None or current["metadata"]["uid"] != meta["uid"]:
                gone.append(str(meta["name"]))
                continue
            new = {**current, "spec": {**current["spec"], "nodeName": node}}
            new["metadata"] = dict(current["metadata"])
            new["status"] = dict(current.get("status") or {})
            set_condition(new, {"type": "PodScheduled", "status": "True"})
            done.append((store.commit("pods", current, new), node))
    for bound, node in done:
        announce(store, bound, node)
    return gone


def announce(store: Store, pod: Mapping[str, Any], node: str) -> None:
    meta = pod["metadata"]
    note = f"Successfully assigned {meta['namespace']}/{meta['name']} to {node}"
    events.record(store, pod, "Normal", "Scheduled", note, SCHEDULER)


def unschedulable(store: Store, pod: Mapping[str, Any], message: str) -> None:
    def mark(draft: dict[str, Any]) -> None:
        set_condition(
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
        pod = store.mutate("pods", meta["namespace"], meta["name"], mark, "status")
    events.record(store, pod, "Warning", "FailedScheduling", message, SCHEDULER)


def evict(store: Store, victim: Mapping[str, Any], preemptor_uid: str, node: str) -> None:
    """Mark ``victim`` a disruption target, say so in an event, and delete it."""
    meta = victim["metadata"]
    scheduler = (victim.get("spec") or {}).get("schedulerName") or SCHEDULER

    def target(draft: dict[str, Any]) -> None:
        set_condition(
            draft,
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "PreemptionByScheduler",
                "message": f"{scheduler}: preempting to accommodate a higher priority pod",
            },
        )

    with contextlib.suppress(ApiError):
        victim = store.mutate("pods", meta["namespace"], meta["name"], target, "status")
        note = f"Preempted by pod {preemptor_uid} on node {node}"
        events.record(store, victim, "Normal", "Preempted", note, SCHEDULER)
        store.delete("pods", meta["namespace"], meta["name"])


def nominate(store: Store, pod: Mapping[str, Any], node: str) -> None:
    def write(draft: dict[str, Any]) -> None:
        draft.setdefault("status", {})["nominatedNodeName"] = node

    meta = pod["metadata"]
    with contextlib.suppress(ApiError):
        store.mutate("pods", meta["namespace"], meta["name"], write, "status")


def too_few(
    total: int, group: tuple[str, str], pod: Mapping[str, Any], members: int, wanted: int
) -> str:
    """Coscheduling's PreFilter refusal as the FitError carries it, PostFilter's after it."""
    name = pod["metadata"]["name"]
    head = (
        f"0/{total} nodes are available: pre-filter pod {name} cannot find enough sibling"
        f" pods, current pods number: {members}, minMember of group: {wanted}."
    )
    tail = f" preemption: 0/{total} nodes are available: {total} Preemption is not helpful"
    return f"{head}{tail} for scheduling.{rejected(group, pod)}"


def rejected(group: tuple[str, str], pod: Mapping[str, Any]) -> str:
    """What coscheduling's PostFilter appends when a member of a gang fits nowhere."""
    return (
        f", PodGroup {group[0]}/{group[1]} gets rejected due to Pod"
        f" {pod['metadata']['name']} is unschedulable even after PostFilter"
    )


def set_condition(pod: dict[str, Any], condition: dict[str, Any]) -> None:
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
