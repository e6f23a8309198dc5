"""Waiting for a worker's pod by WATCH, and noticing when it dies afterwards.

:func:`follow_until_ready` reads the pod's watch events (no polling) until it is Ready, the
cluster reports a failure (see :mod:`podstate`), or a deadline passes: not scheduled within
``backend.scheduled_timeout_s``, not ready within ``backend.ready_timeout_s``. Failures
become a :class:`ServerStartError` whose message is the cluster's reason, its message and,
for crashes, the last lines of the container's log; a timeout carries the pod's last
Warning events (``FailedMount`` …).
:func:`watch_death` resolves ``Handle.died`` when the serving pod restarts, fails or
disappears.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from testbed.backends.base import Handle
from testbed.backends.kubernetes.names import worker_selector
from testbed.backends.kubernetes.podstate import PodState, requested, restarts, verdict_of
from testbed.clients.kube import Changes, Kube
from testbed.config.campaign import KubernetesSettings
from testbed.core.errors import ServerStartError

LOG_LINES = 30


async def follow_until_ready(
    kube: Kube,
    namespace: str,
    run_id: str,
    worker_id: str,
    deployment: Mapping[str, Any],
    settings: KubernetesSettings,
    manifest: Mapping[str, Any],
) -> dict[str, Any]:
    """The worker's Ready pod, or ServerStartError with what the cluster said."""
    name = f"{deployment['name']} ({deployment['server']})"
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
            last = pod
            if kind == "DELETED":
                continue
            state = verdict_of(pod)
            scheduled = scheduled or state.scheduled
            if state.state == "ready":
                return pod
            if state.state == "failed":
                text = await asyncio.to_thread(explain, kube, namespace, pod, state, manifest)
                raise ServerStartError(f"{name}: {text}")
    finally:
        changes.close()


def explain(
    kube: Kube,
    namespace: str,
    pod: Mapping[str, Any],
    state: PodState,
    manifest: Mapping[str, Any],
) -> str:
    """The cluster's reason with its evidence: the scheduler's message and the requests, or
    the last lines of the failing container's log."""
    text = f"{state.reason}: {state.message}".rstrip(": ")
    containers = manifest["spec"]["template"]["spec"]["containers"]
    if state.reason == "Unschedulable":
        return f"{text} (the pod requested {requested(containers[0])})"
    if state.reason == "OOMKilled":
        limit = (containers[0].get("resources") or {}).get("limits", {}).get("memory")
        text += f" (limit {limit})"
    if state.reason in ("CrashLoopBackOff", "OOMKilled", "Error") or state.container:
        log = _log_tail(kube, namespace, pod, state.container or "server")
        if log:
            text += f"; last {LOG_LINES} log lines of {state.container or 'server'}:\n{log}"
    return text


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


def _log_tail(kube: Kube, namespace: str, pod: Mapping[str, Any], container: str) -> str:
    name = str(pod["metadata"]["name"])
    try:
        text = kube.pod_log(name, namespace, container, tail_lines=LOG_LINES, previous=True)
        if not text.strip():
            text = kube.pod_log(name, namespace, container, tail_lines=LOG_LINES)
    except Exception:  # the log is evidence, not a requirement: the reason stands without it
        return ""
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
                    _log_tail, kube, namespace, seen, state.container or "server"
                )
                reason = (
                    f"pod {pod_name} {state.reason or 'restarted'} while serving"
                    f" ({state.message or f'{restarts(seen)} restarts'}); last log lines:\n{why}"
                )
            if reason and not handle.died.done():
                handle.died.set_result(reason)
                return
    finally:
        changes.close()
