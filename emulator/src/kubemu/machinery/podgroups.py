"""PodGroups of the scheduler-plugins coscheduling plugin: the kind, the label, the status.

``scheduling.x-k8s.io/v1alpha1`` ``PodGroup`` (short names ``pg``, ``pgs``) says how many
pods of a gang must be placeable before any is bound (``spec.minMember``); a pod joins a
group with the label ``scheduling.x-k8s.io/pod-group: <name>`` in the group's namespace.
The scheduler (``scheduler.scheduler``) reads them; the PodGroup controller
(``controllers.podgroups``) keeps ``status`` as scheduler-plugins' controller does:
``phase`` Pending → Scheduling (as many pods as ``minMember`` exist; ``scheduleStartTime``
set) → Running (running + succeeded ≥ minMember) → Finished (succeeded ≥ minMember), or
Failed (a pod failed and failed + running + succeeded ≥ minMember), with the counts
``running``, ``succeeded`` and ``failed``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kubemu.storage.meta import now

if TYPE_CHECKING:
    from kubemu.storage.store import Store

GROUP = "scheduling.x-k8s.io"
KEY = f"podgroups.{GROUP}"
LABEL = f"{GROUP}/pod-group"
CRD_KEY = "customresourcedefinitions.apiextensions.k8s.io"
GroupKey = tuple[str, str]  # (namespace, name)

_COLUMNS = (
    ("Phase", "string", ".status.phase"),
    ("MinMember", "integer", ".spec.minMember"),
    ("Running", "string", ".status.running"),
    ("Succeeded", "string", ".status.succeeded"),
    ("Failed", "string", ".status.failed"),
    ("Age", "date", ".metadata.creationTimestamp"),
)


def crd() -> dict[str, Any]:
    """The CustomResourceDefinition scheduler-plugins installs (schema kept to its fields)."""
    spec_schema = {
        "type": "object",
        "properties": {
            "minMember": {"type": "integer", "format": "int32"},
            "minResources": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "scheduleTimeoutSeconds": {"type": "integer", "format": "int32"},
        },
    }
    status_schema = {
        "type": "object",
        "properties": {
            "phase": {"type": "string"},
            "occupiedBy": {"type": "string"},
            "running": {"type": "integer", "format": "int32"},
            "succeeded": {"type": "integer", "format": "int32"},
            "failed": {"type": "integer", "format": "int32"},
            "scheduleStartTime": {"type": "string", "format": "date-time"},
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": KEY,
            "annotations": {
                "api-approved.kubernetes.io": "https://github.com/kubernetes-sigs/scheduler-plugins/pull/50"
            },
        },
        "spec": {
            "group": GROUP,
            "names": {
                "kind": "PodGroup",
                "listKind": "PodGroupList",
                "plural": "podgroups",
                "singular": "podgroup",
                "shortNames": ["pg", "pgs"],
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1alpha1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {"name": n, "type": t, "jsonPath": p} for n, t, p in _COLUMNS
                    ],
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {"spec": spec_schema, "status": status_schema},
                        }
                    },
                }
            ],
        },
    }


def install(store: Store) -> None:
    """Serve the PodGroup kind (the CRD is created once, as a cluster's installer does)."""
    if store.try_get(CRD_KEY, None, KEY) is None:
        store.create(CRD_KEY, crd())


def group_of(pod: Mapping[str, Any]) -> GroupKey | None:
    """The (namespace, PodGroup name) a pod's label puts it in, or None."""
    meta = pod.get("metadata") or {}
    name = (meta.get("labels") or {}).get(LABEL)
    return (str(meta.get("namespace") or "default"), str(name)) if name else None


def min_member(group: Mapping[str, Any]) -> int:
    return int((group.get("spec") or {}).get("minMember") or 0)


def status_for(group: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The status the PodGroup controller writes for ``group`` with these member pods."""
    old = dict(group.get("status") or {})
    phases = [(p.get("status") or {}).get("phase") for p in pods]
    running, succeeded = phases.count("Running"), phases.count("Succeeded")
    failed = phases.count("Failed")
    wanted = min_member(group)
    status: dict[str, Any] = {"phase": old.get("phase") or "Pending"}
    if status["phase"] == "Pending" and len(pods) >= wanted:
        status["phase"] = "Scheduling"
    if status["phase"] != "Pending":
        status["scheduleStartTime"] = old.get("scheduleStartTime") or now()
        done = running + succeeded
        status["phase"] = "Running" if done >= wanted else "Scheduling"
        if failed and failed + done >= wanted:
            status["phase"] = "Failed"
        if succeeded >= wanted:
            status["phase"] = "Finished"
    for name, count in (("running", running), ("succeeded", succeeded), ("failed", failed)):
        if count:
            status[name] = count
    if old.get("occupiedBy"):
        status["occupiedBy"] = old["occupiedBy"]
    return status
