"""The Job controller: runs pods until ``completions`` succeeded or ``backoffLimit`` is passed.

Up to ``parallelism`` pods run at once (never more than the completions still missing).
Failures counted against ``backoffLimit`` are failed pods plus, under
``restartPolicy: OnFailure``, container restarts, as the real controller counts them.
A Job past ``activeDeadlineSeconds`` fails with ``DeadlineExceeded``. ``suspend: true``
deletes the running pods and creates none. Status: ``active``, ``ready``, ``succeeded``,
``failed``, ``startTime``, ``completionTime`` and the ``Complete``/``Failed``/``Suspended``
conditions (with ``SuccessCriteriaMet``/``FailureTarget`` first, as Kubernetes 1.31+ does).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kubefacts.times import seconds_since
from kubemu.controllers.replicasets import (
    create_pod,
    delete_pod,
    is_ready,
    pod_from_template,
)
from kubemu.machinery import events
from kubemu.machinery.loop import ControllerLoop, itself, owned_by, owner_of
from kubemu.storage.meta import now

if TYPE_CHECKING:
    from kubemu.storage.store import Store

COMPONENT = "job-controller"


class JobController:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.loop = ControllerLoop(
            store, "job", {"jobs.batch": itself, "pods": owner_of("Job")}, self.reconcile
        )
        self._started: dict[str, float] = {}

    async def run(self) -> None:
        await self.loop.run()

    def reconcile(self, namespace: str, name: str) -> float | None:
        job = self.store.try_get("jobs.batch", namespace, name)
        if job is None or job["metadata"].get("deletionTimestamp"):
            return None
        status = dict(job.get("status") or {})
        if _finished(status):
            return None
        uid, spec = job["metadata"]["uid"], job["spec"]
        pods = [
            o for k, o in self.store.collector.dependents(uid) if k == "pods" and owned_by(o, uid)
        ]
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        phases = [(p.get("status") or {}).get("phase") for p in live]
        active = [
            p for p, ph in zip(live, phases, strict=True) if ph not in ("Succeeded", "Failed")
        ]
        succeeded = phases.count("Succeeded")
        failed = phases.count("Failed") + _restarts(active, spec)
        completions = int(spec.get("completions") or 1)
        status.setdefault("startTime", now())
        if spec.get("suspend"):
            self._delete(job, active)
            suspended = ("Suspended", "JobSuspended", "Job suspended")
            self._write(job, status, [], succeeded, failed, suspended)
            return None
        ending = self._ending(job, succeeded, failed, completions)
        if ending is not None:
            self._delete(job, active)
            if ending[0] == "Complete":
                status["completionTime"] = now()
                events.record(self.store, job, "Normal", "Completed", "Job completed", COMPONENT)
            else:
                events.record(self.store, job, "Warning", ending[1], ending[2], COMPONENT)
            self._write(job, status, [], succeeded, failed, ending)
            return None
        wanted = min(int(spec.get("parallelism", 1)), completions - succeeded)
        for _ in range(max(wanted - len(active), 0)):
            pod = pod_from_template(job, "Job", "batch/v1")
            active.append(create_pod(self.store, job, pod, COMPONENT))
        self._write(job, status, active, succeeded, failed, None)
        deadline = spec.get("activeDeadlineSeconds")
        return float(deadline) + 0.5 if deadline is not None else None

    def _ending(
        self, job: Mapping[str, Any], succeeded: int, failed: int, completions: int
    ) -> tuple[str, str, str] | None:
        spec = job["spec"]
        if succeeded >= completions:
            return ("Complete", "", "")
        if failed > int(spec.get("backoffLimit", 6)):
            return ("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
        deadline = spec.get("activeDeadlineSeconds")
        started = (job.get("status") or {}).get("startTime")
        if deadline is not None and started and seconds_since(started) >= float(deadline):
            return ("Failed", "DeadlineExceeded", "Job was active longer than specified deadline")
        return None

    def _delete(self, job: Mapping[str, Any], pods: list[dict[str, Any]]) -> None:
        for pod in pods:
            delete_pod(self.store, job, pod, COMPONENT)

    def _write(
        self,
        job: Mapping[str, Any],
        status: dict[str, Any],
        active: list[dict[str, Any]],
        succeeded: int,
        failed: int,
        ending: tuple[str, str, str] | None,
    ) -> None:
        status.update(
            active=len(active),
            ready=sum(1 for p in active if is_ready(p)),
            succeeded=succeeded,
            failed=failed,
        )
        status["uncountedTerminatedPods"] = {}
        status["terminating"] = 0
        for key in ("active", "succeeded", "failed"):
            if not status[key]:
                del status[key]
        if ending is not None:
            kind, reason, message = ending
            stamp = now()
            first = "SuccessCriteriaMet" if kind == "Complete" else "FailureTarget"
            conditions = [] if kind == "Suspended" else [_condition(first, reason, message, stamp)]
            conditions.append(_condition(kind, reason, message, stamp))
            status["conditions"] = conditions

        def change(draft: dict[str, Any]) -> None:
            draft["status"] = status

        if (job.get("status") or {}) != status:
            meta = job["metadata"]
            self.store.mutate("jobs.batch", meta["namespace"], meta["name"], change, "status")


def _condition(kind: str, reason: str, message: str, stamp: str) -> dict[str, Any]:
    condition: dict[str, Any] = {
        "type": kind,
        "status": "True",
        "lastProbeTime": stamp,
        "lastTransitionTime": stamp,
    }
    if reason:
        condition["reason"] = reason
    if message:
        condition["message"] = message
    if kind == "SuccessCriteriaMet":
        condition["reason"] = "CompletionsReached"
        condition["message"] = "Reached expected number of succeeded pods"
    if kind == "Complete":
        condition.setdefault("reason", "CompletionsReached")
        condition.setdefault("message", "Reached expected number of succeeded pods")
    return condition


def _finished(status: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


def _restarts(active: list[dict[str, Any]], spec: Mapping[str, Any]) -> int:
    template = (spec.get("template") or {}).get("spec") or {}
    if template.get("restartPolicy") != "OnFailure":
        return 0
    return sum(
        int(c.get("restartCount", 0))
        for p in active
        for c in (p.get("status") or {}).get("containerStatuses") or []
    )
