"""What a pod's status says, as testbed reads it (pure functions over the pod dict).

:func:`verdict_of` turns one observed pod into ``ready``, ``waiting`` or a failure with the
cluster's own reason: ``Unschedulable`` (the scheduler's message), ``ErrImagePull`` /
``ImagePullBackOff``, ``CrashLoopBackOff``, ``OOMKilled``, a failed init container, or a
failed/evicted pod. The backend decides what to do with it (an ERROR, exit 3), and
:func:`same_again` whether a fresh start could end otherwise (else the ERROR is not retried).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

PULL_FAILURES = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")
CONFIG_FAILURES = ("CreateContainerConfigError", "CreateContainerError", "RunContainerError")
#: Restarts after which a crash is a loop (the kubelet backs off 10 s, 20 s, …): one crash
#: may be a race with a dependency, a loop is not.
CRASH_RESTARTS = 2
#: The reasons of a container that ran and ended (a crash, an init container's exit).
LOOPING = frozenset({"CrashLoopBackOff", "OOMKilled", "Error"})


@dataclass(frozen=True)
class PodState:
    state: Literal["ready", "waiting", "failed"]
    reason: str = ""  # the cluster's word: Unschedulable, ImagePullBackOff, OOMKilled …
    message: str = ""
    container: str = ""  # the container whose logs explain it (crashes)
    scheduled: bool = False


def _condition(pod: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    for cond in pod.get("status", {}).get("conditions") or []:
        if cond.get("type") == kind:
            return dict(cond)
    return {}


def _container_failure(statuses: list[Mapping[str, Any]], init: bool) -> PodState | None:
    for status in statuses:
        name = str(status.get("name", ""))
        state = status.get("state") or {}
        last = (status.get("lastState") or {}).get("terminated") or {}
        waiting = state.get("waiting") or {}
        terminated = state.get("terminated") or {}
        reason = str(waiting.get("reason") or "")
        if reason in PULL_FAILURES or reason in CONFIG_FAILURES:
            return PodState("failed", reason, str(waiting.get("message") or ""), name)
        if terminated.get("reason") == "OOMKilled" or last.get("reason") == "OOMKilled":
            return PodState("failed", "OOMKilled", "the container exceeded its memory limit", name)
        if reason == "CrashLoopBackOff":
            code = last.get("exitCode")
            text = f"exit code {code}" if code is not None else str(waiting.get("message") or "")
            return PodState("failed", "CrashLoopBackOff", text, name)
        ended = terminated or last
        if init and ended and ended.get("exitCode") not in (0, None):
            text = f"init container {name} exited with code {ended.get('exitCode')}"
            return PodState("failed", str(ended.get("reason") or "Error"), text, name)
    return None


def verdict_of(pod: Mapping[str, Any]) -> PodState:
    """Where one pod stands (see the module docstring)."""
    status = pod.get("status") or {}
    scheduled = _condition(pod, "PodScheduled")
    is_scheduled = scheduled.get("status") == "True" or bool(pod.get("spec", {}).get("nodeName"))
    if scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
        return PodState("failed", "Unschedulable", str(scheduled.get("message") or ""))
    for init, key in ((True, "initContainerStatuses"), (False, "containerStatuses")):
        failure = _container_failure(status.get(key) or [], init)
        if failure is not None:
            return PodState(failure.state, failure.reason, failure.message, failure.container, True)
    if status.get("phase") == "Failed":
        reason = str(status.get("reason") or "Failed")
        return PodState("failed", reason, str(status.get("message") or ""), "server", is_scheduled)
    if status.get("phase") == "Running" and _condition(pod, "Ready").get("status") == "True":
        return PodState("ready", scheduled=True)
    return PodState("waiting", scheduled=is_scheduled)


def same_again(state: PodState, restarts: int) -> str | None:
    """Why a fresh start would fail as the pod in ``state`` did, after its container
    restarted ``restarts`` times (None when it may not: an evicted or unschedulable pod, a
    first crash). A retry makes the same pod: the same image from the same registry, the
    same configuration, the same arguments."""
    if state.reason in PULL_FAILURES:
        return "a fresh start pulls the same image"
    if state.reason in CONFIG_FAILURES:
        return "a fresh start makes the container from the same configuration"
    if state.reason in LOOPING and restarts >= CRASH_RESTARTS:
        return "a fresh start runs the same image with the same arguments"
    return None


def restarts(pod: Mapping[str, Any]) -> int:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return sum(int(s.get("restartCount") or 0) for s in statuses)


def requested(container: Mapping[str, Any]) -> str:
    """The requests of a container, for an Unschedulable message ("cpu 4, memory 32Gi")."""
    reqs = (container.get("resources") or {}).get("requests") or {}
    return ", ".join(f"{k} {v}" for k, v in reqs.items())
