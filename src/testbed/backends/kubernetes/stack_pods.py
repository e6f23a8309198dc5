"""A stack's pods while it starts and when it goes: failing fast, and keeping their logs.

A stack is ready when its ``ready`` objects say so, but a pod that cannot start says so
first and more plainly than its workload (``Available=False (MinimumReplicasUnavailable)``
for minutes). :func:`fail_fast` watches the worker's pods (its labels reach every pod
template of the stack) while the ready entries are waited for, and ends the wait with the
pod's own reason as soon as a pod will not start without someone's help:

- a container waiting for a reason no retry cures (ErrImagePull, ImagePullBackOff,
  InvalidImageName, CreateContainerConfigError …);
- a container in CrashLoopBackOff (or OOMKilled) that has restarted ``CRASH_RESTARTS``
  times — one crash may be a race with a dependency, a loop is not;
- a pod that Failed (a pod that is not restarted).

The ERROR says the pod, the reason, the container's message and the last lines of its log.
A cause a fresh start meets again (a pull or configuration failure, a crash loop:
:func:`~testbed.backends.kubernetes.podstate.same_again`) is a :class:`ServerCannotStart`,
which the run does not retry — the ERROR says why; a Failed (evicted) pod may be retried.
Unschedulable is not an ending: a stack may wait for capacity; it is evidence for a
timeout (:func:`describe_pods`). :func:`keep_logs` writes every pod's log (and its previous
instance's) into the worker's folder before the stack is removed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from testbed.backends.kubernetes.podstate import (
    CRASH_RESTARTS,
    LOOPING,
    PodState,
    same_again,
    verdict_of,
)
from testbed.backends.kubernetes.readiness import log_evidence
from testbed.clients.kube import Changes, Kube
from testbed.core.errors import ServerCannotStart, ServerStartError

#: Lines of each container's log kept in the run folder.
KEPT_LINES = 2000
PODS_DIR = "pods"


def _restarts(pod: Mapping[str, Any], container: str) -> int:
    status = pod.get("status") or {}
    every = [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
    return max((int(s.get("restartCount") or 0) for s in every if s.get("name") == container),
               default=0)  # fmt: skip


def ending(pod: Mapping[str, Any]) -> PodState | None:
    """The pod's failure when it ends a stack's wait (see the module docstring), else None."""
    state = verdict_of(pod)
    if state.state != "failed" or state.reason == "Unschedulable":
        return None
    failed_pod = (pod.get("status") or {}).get("phase") == "Failed"
    looping = state.reason in LOOPING and not failed_pod
    if looping and _restarts(pod, state.container) < CRASH_RESTARTS:
        return None  # one crash: the kubelet restarts it, and it may well come up
    return state


async def fail_fast(kube: Kube, namespace: str, selector: str) -> None:
    """Watch the pods ``selector`` picks until cancelled; ServerStartError with the pod's
    reason and log lines when one ends the wait."""
    changes = Changes(kube, "Pod", namespace, selector)
    try:
        async for kind, pod in changes:
            if kind == "DELETED" or pod["metadata"].get("deletionTimestamp"):
                continue
            state = ending(pod)
            if state is None:
                continue
            failed_pod = (pod.get("status") or {}).get("phase") == "Failed"
            why = None if failed_pod else same_again(state, _restarts(pod, state.container))
            text = await asyncio.to_thread(_explain, kube, namespace, pod, state, why)
            raise (ServerStartError if why is None else ServerCannotStart)(text)
    finally:
        changes.close()


def _explain(
    kube: Kube, namespace: str, pod: Mapping[str, Any], state: PodState, why: str | None
) -> str:
    """The pod, its reason and message, why it is not retried (``why``), its log lines."""
    name = pod["metadata"]["name"]
    text = f"pod {name}: {state.reason}"
    if state.message:
        text += f": {state.message}"
    restarts = _restarts(pod, state.container) if state.container else 0
    if restarts:
        text += f" (container {state.container} restarted {restarts} times)"
    if why is not None:  # before the log lines: a truncated reason still says it
        text += f" — not retried: {why}"
    if state.container:
        text += log_evidence(kube, namespace, pod, state.container)
    return text


def describe_pods(kube: Kube, namespace: str, selector: str) -> str:
    """``; its pods: NAME phase (reason) …`` for a timeout's message; empty when none."""
    try:
        pods = kube.list_objects("Pod", namespace, selector)[0]
    except Exception:  # evidence, not a requirement: the timeout stands without it
        return ""
    said = []
    for pod in pods[:10]:
        state = verdict_of(pod)
        phase = (pod.get("status") or {}).get("phase") or "Pending"
        why = f" ({state.reason}{': ' + state.message if state.message else ''})"
        said.append(f"{pod['metadata']['name']} {phase}{why if state.reason else ''}")
    return f"; its pods: {', '.join(said)}" if said else ""


def keep_logs(kube: Kube, namespace: str, selector: str, folder: Path) -> list[Path]:
    """Each pod's containers' logs (the previous instance's too, when it restarted) as
    ``folder/pods/<pod>.<container>[.previous].log``; the files written."""
    written: list[Path] = []
    try:
        pods = kube.list_objects("Pod", namespace, selector)[0]
    except Exception:  # the logs are kept when they can be read; removal goes on regardless
        return written
    for pod in pods:
        name = str(pod["metadata"]["name"])
        status = pod.get("status") or {}
        every = [*(status.get("initContainerStatuses") or []),
                 *(status.get("containerStatuses") or [])]  # fmt: skip
        for container in every:
            cname = str(container.get("name"))
            runs = [False, True] if int(container.get("restartCount") or 0) else [False]
            for previous in runs:
                with contextlib.suppress(Exception):  # a log that cannot be read is skipped
                    text = kube.pod_log(name, namespace, cname, tail_lines=KEPT_LINES,
                                        previous=previous)  # fmt: skip
                    suffix = ".previous" if previous else ""
                    path = folder / PODS_DIR / f"{name}.{cname}{suffix}.log"
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(text)
                    written.append(path)
    return written
