"""The Deployment controller: one ReplicaSet per pod template, rollouts, and the status.

The current template's ReplicaSet is ``<deployment>-<pod-template-hash>`` with the hash as
a label on it, its selector and its pods. A changed template makes a new ReplicaSet:
``Recreate`` scales the old ones to zero and waits until their pods are gone before scaling
the new one up; ``RollingUpdate`` scales the new one up and the old ones down at once (a
surge of 100%: the emulator has no need to ration capacity). Status follows the real
controller: ``replicas``, ``updatedReplicas``, ``readyReplicas``, ``availableReplicas``,
``unavailableReplicas``, ``observedGeneration`` and the ``Available`` and ``Progressing``
conditions with their reasons, including ``ProgressDeadlineExceeded``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kubefacts.ids import short_hash
from kubefacts.times import seconds_since
from kubemu.controllers.replicasets import active_pods
from kubemu.machinery import events
from kubemu.machinery.loop import ControllerLoop, itself, owned_by, owner_of
from kubemu.storage.meta import now
from kubemu.storage.objects import clone

if TYPE_CHECKING:
    from kubemu.storage.store import Store

COMPONENT = "deployment-controller"
HASH = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
_SAFE = "bcdfghjklmnpqrstvwxz2456789"


def template_hash(template: Mapping[str, Any]) -> str:
    """A short, label-safe hash of the pod template (like the controller's safe-encoded FNV)."""
    digest = int(short_hash(template, 16), 16)
    out = ""
    while len(out) < 10:
        digest, rest = divmod(digest, len(_SAFE))
        out += _SAFE[rest]
    return out


class DeploymentController:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.loop = ControllerLoop(
            store,
            "deployment",
            {"deployments.apps": itself, "replicasets.apps": owner_of("Deployment")},
            self.reconcile,
        )

    async def run(self) -> None:
        await self.loop.run()

    def reconcile(self, namespace: str, name: str) -> float | None:
        deploy = self.store.try_get("deployments.apps", namespace, name)
        if deploy is None or deploy["metadata"].get("deletionTimestamp"):
            return None
        uid = deploy["metadata"]["uid"]
        owned = [
            o
            for k, o in self.store.collector.dependents(uid)
            if k == "replicasets.apps" and owned_by(o, uid)
        ]
        pod_hash = template_hash(deploy["spec"].get("template") or {})
        current = next(
            (rs for rs in owned if (rs["metadata"].get("labels") or {}).get(HASH) == pod_hash), None
        )
        old = [rs for rs in owned if rs is not current]
        wanted = int(deploy["spec"].get("replicas", 1))
        recreate = (deploy["spec"].get("strategy") or {}).get("type") == "Recreate"
        for rs in old:
            self._scale(deploy, rs, 0)
        old_pods_left = any(active_pods(self.store, rs) for rs in old)
        target = 0 if recreate and old_pods_left else wanted
        if current is None:
            current = self._create_rs(deploy, pod_hash, owned, target)
        else:
            self._scale(deploy, current, target)
        return self._write_status(deploy, current, old, wanted)

    def _create_rs(
        self, deploy: Mapping[str, Any], pod_hash: str, owned: list[Any], replicas: int
    ) -> dict[str, Any]:
        meta, spec = deploy["metadata"], deploy["spec"]
        template = clone(spec.get("template") or {})
        tmeta = template.setdefault("metadata", {})
        tmeta["labels"] = {**(tmeta.get("labels") or {}), HASH: pod_hash}
        selector = clone(spec.get("selector") or {})
        selector["matchLabels"] = {**(selector.get("matchLabels") or {}), HASH: pod_hash}
        revision = 1 + max(
            (int((rs["metadata"].get("annotations") or {}).get(REVISION, 0)) for rs in owned),
            default=0,
        )
        rs = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{meta['name']}-{pod_hash}",
                "namespace": meta["namespace"],
                "labels": dict(tmeta["labels"]),
                "annotations": {
                    REVISION: str(revision),
                    "deployment.kubernetes.io/desired-replicas": str(spec.get("replicas", 1)),
                },
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {
                "replicas": replicas,
                "minReadySeconds": spec.get("minReadySeconds", 0),
                "selector": selector,
                "template": template,
            },
        }
        created = self.store.create("replicasets.apps", rs)
        note = f"Scaled up replica set {created['metadata']['name']} from 0 to {replicas}"
        events.record(self.store, deploy, "Normal", "ScalingReplicaSet", note, COMPONENT)
        return created

    def _scale(self, deploy: Mapping[str, Any], rs: Mapping[str, Any], replicas: int) -> None:
        before = int(rs["spec"].get("replicas", 1))
        if before == replicas:
            return

        def change(draft: dict[str, Any]) -> None:
            draft["spec"]["replicas"] = replicas

        self.store.mutate(
            "replicasets.apps", rs["metadata"]["namespace"], rs["metadata"]["name"], change
        )
        direction = "up" if replicas > before else "down"
        note = (
            f"Scaled {direction} replica set {rs['metadata']['name']} from {before} to {replicas}"
        )
        events.record(self.store, deploy, "Normal", "ScalingReplicaSet", note, COMPONENT)

    def _write_status(
        self, deploy: Mapping[str, Any], current: Mapping[str, Any], old: list[Any], wanted: int
    ) -> float | None:
        every = [current, *old]
        total = sum(int((rs.get("status") or {}).get("replicas", 0)) for rs in every)
        ready = sum(int((rs.get("status") or {}).get("readyReplicas", 0)) for rs in every)
        available = sum(int((rs.get("status") or {}).get("availableReplicas", 0)) for rs in every)
        updated = int((current.get("status") or {}).get("replicas", 0))
        updated_available = int((current.get("status") or {}).get("availableReplicas", 0))
        max_unavailable = _max_unavailable(deploy, wanted)
        previous = {c["type"]: c for c in (deploy.get("status") or {}).get("conditions") or []}
        rs_name = current["metadata"]["name"]
        has_min = available >= wanted - max_unavailable
        complete = updated == wanted and updated_available == wanted and total == wanted
        progressing, again = self._progressing(
            deploy, previous.get("Progressing"), rs_name, complete
        )
        conditions = [
            _condition(
                previous.get("Available"),
                "Available",
                has_min,
                "MinimumReplicasAvailable" if has_min else "MinimumReplicasUnavailable",
                "Deployment has minimum availability."
                if has_min
                else "Deployment does not have minimum availability.",
            ),
            progressing,
        ]
        status: dict[str, Any] = {
            "observedGeneration": deploy["metadata"].get("generation", 1),
            "replicas": total,
            "updatedReplicas": updated,
            "readyReplicas": ready,
            "availableReplicas": available,
            "unavailableReplicas": max(wanted - available, 0),
            "conditions": conditions,
        }
        status = {k: v for k, v in status.items() if v or k in ("observedGeneration", "conditions")}

        def change(draft: dict[str, Any]) -> None:
            draft["status"] = status

        if (deploy.get("status") or {}) != status:
            meta = deploy["metadata"]
            self.store.mutate("deployments.apps", meta["namespace"], meta["name"], change, "status")
        return again

    def _progressing(
        self, deploy: Mapping[str, Any], old: Mapping[str, Any] | None, rs_name: str, complete: bool
    ) -> tuple[dict[str, Any], float | None]:
        if complete:
            reason, message = (
                "NewReplicaSetAvailable",
                f'ReplicaSet "{rs_name}" has successfully progressed.',
            )
            return _condition(old, "Progressing", True, reason, message), None
        deadline = float(deploy["spec"].get("progressDeadlineSeconds", 600))
        started = (
            seconds_since(old.get("lastUpdateTime"))
            if old is not None and old.get("reason") != "NewReplicaSetAvailable"
            else 0.0
        )
        if old is not None and (
            old.get("reason") == "ProgressDeadlineExceeded" or started > deadline
        ):
            message = f'ReplicaSet "{rs_name}" has timed out progressing.'
            return _condition(old, "Progressing", False, "ProgressDeadlineExceeded", message), None
        if old is None or old.get("reason") == "NewReplicaSetAvailable":
            reason, message = "NewReplicaSetCreated", f'Created new replica set "{rs_name}"'
        else:
            reason, message = "ReplicaSetUpdated", f'ReplicaSet "{rs_name}" is progressing.'
        condition = _condition(old, "Progressing", True, reason, message)
        if old is not None and old.get("reason") in ("NewReplicaSetCreated", "ReplicaSetUpdated"):
            condition["lastUpdateTime"] = old.get("lastUpdateTime", condition["lastUpdateTime"])
        return condition, max(deadline - started, 0.0) + 1.0


def _condition(
    old: Mapping[str, Any] | None, kind: str, ok: bool, reason: str, message: str
) -> dict[str, Any]:
    value = "True" if ok else "False"
    stamp = now()
    same_status = old is not None and old.get("status") == value
    same = same_status and old is not None and old.get("reason") == reason
    return {
        "type": kind,
        "status": value,
        "lastUpdateTime": old["lastUpdateTime"] if same and old else stamp,
        "lastTransitionTime": old["lastTransitionTime"] if same_status and old else stamp,
        "reason": reason,
        "message": message,
    }


def _max_unavailable(deploy: Mapping[str, Any], wanted: int) -> int:
    strategy = deploy["spec"].get("strategy") or {}
    if strategy.get("type") == "Recreate":
        return 0
    value = (strategy.get("rollingUpdate") or {}).get("maxUnavailable", "25%")
    if isinstance(value, str) and value.endswith("%"):
        return math.floor(wanted * float(value[:-1]) / 100)
    return int(value)
