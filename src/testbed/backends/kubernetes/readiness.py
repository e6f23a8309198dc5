"""Waiting for a worker's pod by WATCH, and noticing when it dies afterwards.

:func:`follow_until_ready` reads the pod's watch events (no polling) until it is Ready, the
cluster reports a failure (see :mod:`podstate`), or a deadline passes: not scheduled within
``backend.scheduled_timeout_s``, not ready within ``backend.ready_timeout_s``. Only the pods
of the Deployment just applied count (:class:`Lineage`: their ReplicaSet is that Deployment's,
by uid): a retry re-applies the worker's objects while the previous attempt's pod, with the
same labels, is still Terminating and reporting its own failure. Failures become a
:class:`ServerStartError` whose message is the cluster's reason, its message and, for
crashes, the last lines of the container's log (or that it printed nothing); a timeout
carries the pod's last Warning events (``FailedMount`` …). A cause a fresh start meets again
(:func:`~testbed.backends.kubernetes.podstate.same_again`: an image that cannot be pulled, a
crash loop) is a :class:`ServerCannotStart`, not retried, and its message says why.
:func:`watch_death` resolves ``Handle.died`` when the serving pod restarts, fails or
disappears, with the same evidence.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from testbed.backends.base import Handle
from testbed.backends.kubernetes.names import worker_selector
from testbed.backends.kubernetes.podstate import (
    PodState,
    requested,
    restarts,
    same_again,
    verdict_of,
)
from testbed.clients.kube import Changes, Kube
from testbed.config.backend_settings import KubernetesSettings
from testbed.core.errors import ServerCannotStart, ServerStartError
from testbed.servers.startup_log import root_cause

LOG_LINES = 30
SILENT = "the server printed nothing before exiting"


def _controller(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The owner reference that controls ``obj`` (its ReplicaSet, its Deployment)."""
    refs = obj.get("metadata", {}).get("ownerReferences") or []
    return next((r for r in refs if r.get("controller")), None)


class Lineage:
    """Which pods are the Deployment ``deployment_uid``'s own: those whose controlling
    ReplicaSet that Deployment controls. The pod-template hash and the worker's labels are
    the same for every attempt of a worker; the uids are not. Each ReplicaSet is looked up
    once."""

    def __init__(self, kube: Kube, namespace: str, deployment_uid: str) -> None:
        self._kube, self._namespace, self._uid = kube, namespace, deployment_uid
        self._known: dict[str, bool] = {}  # ReplicaSet uid → controlled by the Deployment

    async def owns(self, pod: Mapping[str, Any]) -> bool:
        ref = _controller(pod)
        if ref is None or ref.get("kind") != "ReplicaSet":
            return False
        uid = str(ref.get("uid"))
        if uid not in self._known:
            rs = await asyncio.to_thread(
                self._kube.get, "ReplicaSet", str(ref.get("name")), self._namespace
            )
            # a ReplicaSet of the same name may be the new one: compare uids, not names
            owner = _controller(rs) if rs is not None else None
            self._known[uid] = (
                rs is not None
                and rs["metadata"].get("uid") == uid
                and owner is not None
                and owner.get("uid") == self._uid
            )
        return self._known[uid]


async def follow_until_ready(
    kube: Kube,
    namespace: str,
    run_id: str,
    worker_id: str,
    name: str,
    settings: KubernetesSettings,
    manifest: Mapping[str, Any],
    lineage: Lineage,
) -> dict[str, Any]:
    """The worker's Ready pod (one of ``lineage``), or ServerStartError with what the
    cluster said; ``name`` is the server as messages call it (``ServerLaunch.title``)."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    scheduled_by = started + settings.scheduled_timeout_s
    ready_by = started + settings.ready_timeout_s
    changes = Changes(kube, "Pod", namespace, worker_selector(run_id, worker_id))
    scheduled = False
    last: Mapping[str, Any] | None = None
    try:
        while True:
            deadline = ready_by if scheduled else min(scheduled_by, ready_by)
            remaining = deadline - loop.time()
            if remaining <= 0:
                what = "scheduled" if not scheduled and scheduled_by <= ready_by else "ready"
                seen = await asyncio.to_thread(_warnings, kube, namespace, last)
                raise ServerStartError(
                    f"{name}: startup timeout — the pod was not {what} within"
                    f" {deadline - started:.0f} s (backend.{what}_timeout_s){seen}"
                )
            event = await changes.next(remaining)
            if event is None:
                continue
            kind, pod = event
            gone = kind == "DELETED" or pod["metadata"].get("deletionTimestamp")
            if gone or not await lineage.owns(pod):
                continue  # on its way out (its ReplicaSet replaces it), or not ours
            last = pod
            state = verdict_of(pod)
            scheduled = scheduled or state.scheduled
            if state.state == "ready":
                return pod
            if state.state == "failed":
                failed_pod = (pod.get("status") or {}).get("phase") == "Failed"
                why = None if failed_pod else same_again(state, restarts(pod))
                text = await asyncio.to_thread(explain, kube, namespace, pod, state, manifest, why)
                raise (ServerStartError if why is None else ServerCannotStart)(f"{name}: {text}")
    finally:
        changes.close()


def explain(
    kube: Kube,
    namespace: str,
    pod: Mapping[str, Any],
    state: PodState,
    manifest: Mapping[str, Any],
    why: str | None = None,
) -> str:
    """The cluster's reason with its evidence: the scheduler's message and the requests, or
    the last lines of the failing container's log; ``why``: why it is not retried."""
    text = f"{state.reason}: {state.message}".rstrip(": ")
    containers = manifest["spec"]["template"]["spec"]["containers"]
    if state.reason == "Unschedulable":
        return f"{text} (the pod requested {requested(containers[0])})"
    if state.reason == "OOMKilled":
        limit = (containers[0].get("resources") or {}).get("limits", {}).get("memory")
        text += f" (limit {limit})"
    if why is not None:  # before the log lines: a truncated reason still says it
        text += f" — not retried: {why}"
    if state.reason in ("CrashLoopBackOff", "OOMKilled", "Error") or state.container:
        text += log_evidence(kube, namespace, pod, state.container or "server")
    return text


def log_evidence(kube: Kube, namespace: str, pod: Mapping[str, Any], container: str) -> str:
    """``; last N log lines of C:`` and the lines, or the fact that there were none."""
    log = _log_tail(kube, namespace, pod, container)
    if log is None:
        return ""
    if not log:
        return f"; {SILENT}" if container == "server" else f"; {container} printed nothing"
    cause = root_cause(log)  # the error line that says why, before the lines around it
    said = f": {cause}" if cause else ""
    return f"{said}; last {LOG_LINES} log lines of {container}:\n{log}"


def _warnings(kube: Kube, namespace: str, pod: Mapping[str, Any] | None) -> str:
    """The pod's last Warning events (a volume that will not mount, a probe that fails), as
    the end of a timeout message; empty when there are none or they cannot be read."""
    if pod is None:
        return ""
    try:
        notes = kube.warnings(namespace, str(pod["metadata"]["name"]))
    except Exception:  # the events are evidence, not a requirement: the timeout stands
        return ""
    return f"; the cluster's last warnings: {'; '.join(notes)}" if notes else ""


def _log_tail(kube: Kube, namespace: str, pod: Mapping[str, Any], container: str) -> str | None:
    """The last lines the container printed before it ended ("" when none), else those of
    its current run; None when the log cannot be read."""
    name = str(pod["metadata"]["name"])
    try:
        text = kube.pod_log(name, namespace, container, tail_lines=LOG_LINES, previous=True)
        if not text.strip():
            text = kube.pod_log(name, namespace, container, tail_lines=LOG_LINES)
    except Exception:  # the log is evidence, not a requirement: the reason stands without it
        return None
    return text.rstrip()


async def watch_death(
    kube: Kube,
    namespace: str,
    run_id: str,
    worker_id: str,
    pod: Mapping[str, Any],
    handle: Handle,
) -> None:
    """Resolve ``handle.died`` when the serving pod restarts, fails or is deleted."""
    pod_name = str(pod["metadata"]["name"])
    base = restarts(pod)
    changes = Changes(kube, "Pod", namespace, worker_selector(run_id, worker_id))
    try:
        async for kind, seen in changes:
            if seen["metadata"]["name"] != pod_name:
                continue
            state = verdict_of(seen)
            reason = ""
            if kind == "DELETED":
                reason = f"pod {pod_name} was deleted while serving"
            elif state.state == "failed" or restarts(seen) > base:
                why = await asyncio.to_thread(
                    log_evidence, kube, namespace, seen, state.container or "server"
                )
                reason = f"pod {pod_name} {_ended(seen, state)} while serving{why}"
            if reason and not handle.died.done():
                handle.died.set_result(reason)
                return
    finally:
        changes.close()


def _ended(pod: Mapping[str, Any], state: PodState) -> str:
    """How the serving pod ended, in the cluster's words: ``exited with code 1 (Error),
    restarted 1 time(s)``, ``CrashLoopBackOff (exit code 1)``, ``Evicted (…)``."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        current = status.get("state") or {}
        ended = current.get("terminated") or (status.get("lastState") or {}).get("terminated")
        if ended:
            count = int(status.get("restartCount") or 0)
            again = f", restarted {count} time(s)" if count else ""
            return f"exited with code {ended.get('exitCode')} ({ended.get('reason')}){again}"
    if state.reason:
        return f"{state.reason} ({state.message})" if state.message else state.reason
    return f"restarted ({restarts(pod)} restarts)"
