"""Readiness as each kind publishes it — what ``kubectl rollout status`` reads (pure).

A ``ready`` entry without a ``condition`` waits for its object the way its kind says it is
done, because StatefulSets and DaemonSets publish no condition at all:

- Deployment: the controller saw this generation, ``Progressing`` is not
  ``ProgressDeadlineExceeded``, every replica is updated, no old one is left, every updated
  one is available (kubectl's DeploymentStatusViewer);
- StatefulSet: the controller saw this generation, ``readyReplicas`` = ``replicas``, and the
  update is done: ``updatedReplicas`` ≥ ``replicas − partition`` under RollingUpdate, the
  update revision is the current one otherwise (StatefulSetStatusViewer);
- DaemonSet: the controller saw this generation, ``updatedNumberScheduled`` and
  ``numberAvailable`` reach ``desiredNumberScheduled`` (DaemonSetStatusViewer);
- ReplicaSet: the controller saw this generation, ``readyReplicas`` = ``replicas``;
- Pod: its ``Ready`` condition (a Failed or Succeeded pod will never be);
- LeaderWorkerSet: ``Available`` is True and ``readyReplicas`` = ``replicas`` (every group).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from testbed.backends.kubernetes import conditions
from testbed.backends.kubernetes.conditions import Reading, conditions_of, describe
from testbed.config.stacks import ROLLOUT_KINDS, ReadyCondition


def _status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    status = obj.get("status")
    return status if isinstance(status, Mapping) else {}


def _unseen(obj: Mapping[str, Any]) -> Reading | None:
    """Waiting while the controller has not seen the object's current generation."""
    generation = int((obj.get("metadata") or {}).get("generation") or 0)
    seen = int(_status(obj).get("observedGeneration") or 0)
    if seen == 0 or generation > seen:
        return Reading("waiting", "its controller has not seen its spec yet")
    return None


def _replicas(obj: Mapping[str, Any]) -> int:
    return int((obj.get("spec") or {}).get("replicas", 1))


def _count(obj: Mapping[str, Any], field: str) -> int:
    return int(_status(obj).get(field) or 0)


def _deployment(obj: Mapping[str, Any]) -> Reading:
    if (unseen := _unseen(obj)) is not None:
        return unseen
    for c in conditions_of(obj):
        if c.get("type") == "Progressing" and c.get("reason") == "ProgressDeadlineExceeded":
            return Reading("failed", describe(obj))
    want, updated = _replicas(obj), _count(obj, "updatedReplicas")
    if updated < want:
        return Reading("waiting", f"{updated} of {want} new replicas have been updated")
    if _count(obj, "replicas") > updated:
        left = _count(obj, "replicas") - updated
        return Reading("waiting", f"{left} old replicas are pending termination")
    if (available := _count(obj, "availableReplicas")) < updated:
        return Reading("waiting", f"{available} of {updated} updated replicas are available")
    return Reading("ready")


def _statefulset(obj: Mapping[str, Any]) -> Reading:
    if (unseen := _unseen(obj)) is not None:
        return unseen
    want, ready = _replicas(obj), _count(obj, "readyReplicas")
    if ready < want:
        return Reading("waiting", f"{ready} of {want} pods are ready")
    strategy = (obj.get("spec") or {}).get("updateStrategy") or {}
    if strategy.get("type", "RollingUpdate") == "RollingUpdate":
        partition = int((strategy.get("rollingUpdate") or {}).get("partition") or 0)
        if (updated := _count(obj, "updatedReplicas")) < want - partition:
            return Reading("waiting", f"{updated} of {want - partition} new pods are updated")
        return Reading("ready")
    status = _status(obj)
    if status.get("updateRevision") != status.get("currentRevision"):
        return Reading("waiting", f"pods are moving to revision {status.get('updateRevision')}")
    return Reading("ready")


def _daemonset(obj: Mapping[str, Any]) -> Reading:
    if (unseen := _unseen(obj)) is not None:
        return unseen
    desired = _count(obj, "desiredNumberScheduled")
    if (updated := _count(obj, "updatedNumberScheduled")) < desired:
        return Reading("waiting", f"{updated} of {desired} updated pods are scheduled")
    if (available := _count(obj, "numberAvailable")) < desired:
        return Reading("waiting", f"{available} of {desired} updated pods are available")
    return Reading("ready")


def _replicaset(obj: Mapping[str, Any]) -> Reading:
    if (unseen := _unseen(obj)) is not None:
        return unseen
    want, ready = _replicas(obj), _count(obj, "readyReplicas")
    return Reading("ready") if ready >= want else Reading("waiting", f"{ready} of {want} ready")


def _pod(obj: Mapping[str, Any]) -> Reading:
    phase = _status(obj).get("phase")
    if phase in ("Failed", "Succeeded"):
        return Reading("failed", f"the pod is {phase} and will never be Ready; {describe(obj)}")
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions_of(obj))
    return Reading("ready") if ready else Reading("waiting", describe(obj))


def _leaderworkerset(obj: Mapping[str, Any]) -> Reading:
    want, ready = _replicas(obj), _count(obj, "readyReplicas")
    available = any(
        c.get("type") == "Available" and c.get("status") == "True" for c in conditions_of(obj)
    )
    if available and ready >= want:
        return Reading("ready")
    return Reading("waiting", f"{ready} of {want} groups are ready; {describe(obj)}")


READERS: dict[str, Callable[[Mapping[str, Any]], Reading]] = {
    "Deployment": _deployment,
    "StatefulSet": _statefulset,
    "DaemonSet": _daemonset,
    "ReplicaSet": _replicaset,
    "Pod": _pod,
    "LeaderWorkerSet": _leaderworkerset,
}


def read(obj: Mapping[str, Any], kind: str) -> Reading:
    """Where ``obj`` of ``kind`` (one of :data:`READERS`) stands."""
    return READERS[kind](obj)


assert set(READERS) == set(ROLLOUT_KINDS), "config.stacks.ROLLOUT_KINDS names the readers here"


def check_for(entry: ReadyCondition) -> tuple[Callable[[Mapping[str, Any]], Reading], str]:
    """How to read ``entry``'s object, and what the wait is for (in an ERROR's words): its
    named condition, else what its kind publishes."""
    if entry.condition is None:
        kind = entry.kind
        return (lambda obj: read(obj, kind)), f"{kind}/{entry.name} to be ready (as its kind says)"
    condition, on_false = entry.condition, entry.on_false

    def named(obj: Mapping[str, Any]) -> Reading:
        return conditions.read(obj, entry.kind, condition, on_false)

    return named, f"{entry.kind}/{entry.name} to be {condition}"
