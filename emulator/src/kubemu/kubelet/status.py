"""Pod and container status as the real kubelet writes it: pure builders over container records.

A :class:`ContainerRecord` holds one container's state (``waiting`` / ``running`` /
``terminated`` with reason, message, exitCode and timestamps), its last state, restart count,
readiness and ids. :func:`pod_status` turns the records into the pod's ``status``: phase,
the conditions ``PodReadyToStartContainers``, ``Initialized``, ``Ready``, ``ContainersReady``
(``PodScheduled`` comes from the scheduler and is kept), each with a ``lastTransitionTime``
that moves only when its status changes, and the container status lists.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubemu.storage.meta import now


def image_id(image: str) -> str:
    """A stable digest reference for ``image`` (the emulator pulls nothing)."""
    digest = hashlib.sha256(image.encode()).hexdigest()
    name = image.rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image
    return f"{name}@sha256:{digest}"


@dataclass
class ContainerRecord:
    """One container's status as the kubelet reports it."""

    name: str
    image: str
    init: bool = False
    state: dict[str, Any] = field(
        default_factory=lambda: {"waiting": {"reason": "ContainerCreating"}}
    )
    last_state: dict[str, Any] = field(default_factory=dict)
    restart_count: int = 0
    ready: bool = False
    started: bool = False
    container_id: str = ""
    #: True once it will not run again (terminated and no restart coming).
    done: bool = False

    def waiting(self, reason: str, message: str = "") -> None:
        self.state = {"waiting": {"reason": reason, **({"message": message} if message else {})}}
        self.ready = False

    def running(self, started_at: str, container_id: str) -> None:
        self.state = {"running": {"startedAt": started_at}}
        self.container_id = container_id
        self.started = True

    def terminated(self, code: int, reason: str, started_at: str, message: str = "") -> None:
        body: dict[str, Any] = {
            "exitCode": code,
            "reason": reason,
            "startedAt": started_at,
            "finishedAt": now(),
            "containerID": self.container_id,
        }
        if message:
            body["message"] = message
        self.state = {"terminated": body}
        self.ready = False
        self.started = False

    def to_status(self) -> dict[str, Any]:
        status: dict[str, Any] = {
            "name": self.name,
            "image": self.image,
            "imageID": image_id(self.image) if self.container_id else "",
            "ready": self.ready,
            "restartCount": self.restart_count,
            "started": self.started,
            "state": self.state,
            "lastState": self.last_state,
        }
        if self.container_id:
            status["containerID"] = self.container_id
        return status


def phase(records: Sequence[ContainerRecord], restart_policy: str, init_failed: bool) -> str:
    """Pending, Running, Succeeded or Failed from the containers (the kubelet's getPhase)."""
    if init_failed:
        return "Failed"
    apps = [r for r in records if not r.init]
    if any(r.init and not r.done for r in records):
        return "Pending"
    if not any(r.started or "terminated" in r.state or r.restart_count for r in apps):
        return "Pending"
    if all(r.done for r in apps):
        failed = any(r.state.get("terminated", {}).get("exitCode", 0) != 0 for r in apps)
        return "Failed" if failed else "Succeeded"
    del restart_policy
    return "Running"


def pod_status(
    previous: Mapping[str, Any],
    records: Sequence[ContainerRecord],
    pod_phase: str,
    extra: Mapping[str, Any],
) -> dict[str, Any]:
    """The pod's new ``status``; ``previous`` supplies PodScheduled and transition times."""
    inits = [r for r in records if r.init]
    apps = [r for r in records if not r.init]
    old = {c["type"]: c for c in previous.get("conditions") or []}
    terminal = pod_phase in ("Succeeded", "Failed")
    pending_inits = [r.name for r in inits if not r.done]
    unready = [r.name for r in apps if not r.ready]
    wanted: list[tuple[str, bool, str, str]] = [
        ("PodReadyToStartContainers", not terminal or bool(apps), "", ""),
        (
            "Initialized",
            not pending_inits,
            "ContainersNotInitialized",
            f"containers with incomplete status: [{' '.join(pending_inits)}]",
        ),
    ]
    reason = "PodCompleted" if terminal else "ContainersNotReady"
    message = "" if terminal else f"containers with unready status: [{' '.join(unready)}]"
    wanted += [
        ("Ready", not unready and not terminal, reason, message),
        ("ContainersReady", not unready and not terminal, reason, message),
    ]
    conditions = [_condition(old.get(kind), kind, ok, why, text) for kind, ok, why, text in wanted]
    if "PodScheduled" in old:
        conditions.append(old["PodScheduled"])
    status: dict[str, Any] = {
        **{k: v for k, v in previous.items() if k not in ("conditions", "phase")},
        **extra,
        "phase": pod_phase,
        "conditions": conditions,
        "containerStatuses": [r.to_status() for r in apps],
    }
    if inits:
        status["initContainerStatuses"] = [r.to_status() for r in inits]
    return status


def _condition(
    old: Mapping[str, Any] | None, kind: str, ok: bool, reason: str, message: str
) -> dict[str, Any]:
    value = "True" if ok else "False"
    same = old is not None and old.get("status") == value
    condition: dict[str, Any] = {
        "type": kind,
        "status": value,
        "lastProbeTime": None,
        "lastTransitionTime": old["lastTransitionTime"] if same and old else now(),
    }
    if not ok and reason:
        condition["reason"] = reason
        if message:
            condition["message"] = message
    return condition
