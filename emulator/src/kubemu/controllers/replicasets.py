"""The ReplicaSet controller: keeps ``spec.replicas`` pods alive and reports them in ``status``.

Pods are created from the template with ``generateName: <replicaset>-`` and a controller
owner reference; a pod deleted or finished is replaced; surplus pods are deleted, those
not yet scheduled or ready first. Status: ``replicas`` (active pods),
``fullyLabeledReplicas``, ``readyReplicas``, ``availableReplicas`` (ready for
``minReadySeconds``, which the emulator takes as ready), ``observedGeneration``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kubemu.machinery import events
from kubemu.machinery.loop import ControllerLoop, itself, owner_of
from kubemu.storage.errors import ApiError
from kubemu.storage.objects import Obj

if TYPE_CHECKING:
    from kubemu.storage.store import Store

COMPONENT = "replicaset-controller"


def active_pods(store: Store, owner: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Pods ``owner`` controls that are neither finished nor being deleted."""
    uid = owner["metadata"]["uid"]
    pods = []
    for key, obj in store.collector.dependents(uid):
        if key != "pods" or obj["metadata"].get("deletionTimestamp"):
            continue
        if not any(
            r.get("uid") == uid and r.get("controller")
            for r in obj["metadata"].get("ownerReferences") or []
        ):
            continue
        if (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        pods.append(obj)
    return pods


def is_ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def create_pod(store: Store, owner: Mapping[str, Any], pod: dict[str, Any], component: str) -> Obj:
    """Create ``pod`` for ``owner`` and record the ``SuccessfulCreate`` event its controller
    writes (every workload controller's words)."""
    created = store.create("pods", pod)
    note = f"Created pod: {created['metadata']['name']}"
    events.record(store, owner, "Normal", "SuccessfulCreate", note, component)
    return created


def delete_pod(
    store: Store, owner: Mapping[str, Any], pod: Mapping[str, Any], component: str
) -> bool:
    """Delete ``owner``'s ``pod`` and record ``SuccessfulDelete``; False when the store
    refused (the pod is already gone), with no event."""
    meta = pod["metadata"]
    try:
        store.delete("pods", meta["namespace"], meta["name"])
    except ApiError:
        return False
    note = f"Deleted pod: {meta['name']}"
    events.record(store, owner, "Normal", "SuccessfulDelete", note, component)
    return True


def pod_from_template(owner: Mapping[str, Any], kind: str, api_version: str) -> dict[str, Any]:
    """A new pod of ``owner``'s template, named ``<owner>-xxxxx`` and owned by it."""
    meta = owner["metadata"]
    template = owner["spec"].get("template") or {}
    tmeta = template.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": f"{meta['name']}-",
            "namespace": meta["namespace"],
            "labels": dict(tmeta.get("labels") or {}),
            "annotations": dict(tmeta.get("annotations") or {}),
            "ownerReferences": [
                {
                    "apiVersion": api_version,
                    "kind": kind,
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": template.get("spec") or {},
    }


class ReplicaSetController:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.loop = ControllerLoop(
            store,
            "replicaset",
            {"replicasets.apps": itself, "pods": owner_of("ReplicaSet")},
            self.reconcile,
        )

    async def run(self) -> None:
        await self.loop.run()

    def reconcile(self, namespace: str, name: str) -> float | None:
        rs = self.store.try_get("replicasets.apps", namespace, name)
        if rs is None or rs["metadata"].get("deletionTimestamp"):
            return None
        pods = active_pods(self.store, rs)
        wanted = int(rs["spec"].get("replicas", 1))
        if len(pods) < wanted:
            for _ in range(wanted - len(pods)):
                pod = pod_from_template(rs, "ReplicaSet", "apps/v1")
                pods.append(create_pod(self.store, rs, pod, COMPONENT))
        elif len(pods) > wanted:
            surplus = sorted(pods, key=_deletion_order)[: len(pods) - wanted]
            for pod in surplus:
                delete_pod(self.store, rs, pod, COMPONENT)
            pods = [p for p in pods if p not in surplus]
        self._write_status(rs, pods)
        return None

    def _write_status(self, rs: Mapping[str, Any], pods: list[dict[str, Any]]) -> None:
        selector = (rs["spec"].get("selector") or {}).get("matchLabels") or {}
        labeled = [
            p
            for p in pods
            if all((p["metadata"].get("labels") or {}).get(k) == v for k, v in selector.items())
        ]
        ready = sum(1 for p in pods if is_ready(p))
        status = {
            "replicas": len(pods),
            "fullyLabeledReplicas": len(labeled),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "observedGeneration": rs["metadata"].get("generation", 1),
        }
        status = {k: v for k, v in status.items() if v or k in ("replicas", "observedGeneration")}

        def change(draft: dict[str, Any]) -> None:
            draft["status"] = status

        if (rs.get("status") or {}) != status:
            self.store.mutate(
                "replicasets.apps",
                rs["metadata"]["namespace"],
                rs["metadata"]["name"],
                change,
                "status",
            )


def _deletion_order(pod: Mapping[str, Any]) -> tuple[int, int, str]:
    """Unscheduled before scheduled, unready before ready, newer before older."""
    scheduled = 1 if (pod.get("spec") or {}).get("nodeName") else 0
    created = str(pod["metadata"].get("creationTimestamp") or "")
    return (scheduled, 1 if is_ready(pod) else 0, "".join(chr(255 - ord(c)) for c in created))
