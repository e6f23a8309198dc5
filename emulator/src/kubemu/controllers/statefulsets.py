"""The StatefulSet controller: pods with stable names ``<set>-<ordinal>``, made in order.

As ``pkg/controller/statefulset`` does, for what stacks use:

- pods ``<name>-<i>`` for ``i`` in ``spec.ordinals.start`` … ``+ replicas - 1``, owned by
  the StatefulSet, labelled ``controller-revision-hash: <name>-<hash>``,
  ``statefulset.kubernetes.io/pod-name`` and ``apps.kubernetes.io/pod-index``; with
  ``spec.hostname`` the pod's name and ``spec.subdomain`` the set's ``serviceName``, so a
  headless Service of that name gives each pod the DNS name ``<pod>.<service>`` (the
  emulator has no DNS: the names are in the pods, and the kubelet's Service variables
  leave headless Services out, as the real kubelet does);
- ``podManagementPolicy: OrderedReady`` (the default): pod ``i + 1`` is created only once
  pods ``0 … i`` are Running and Ready, surplus pods go highest ordinal first, one at a
  time; ``Parallel`` creates and deletes them all at once;
- a Failed pod is deleted and made again under the same name;
- ``volumeClaimTemplates``: a claim ``<template>-<pod>`` per pod, kept when the pod goes;
- ``updateStrategy: RollingUpdate`` (the default, ``partition: 0``): when the template
  changes, the pods at an old revision with an ordinal at or above the partition are
  replaced highest first, one at a time, each once every pod is Ready; ``OnDelete``
  replaces a pod only once someone deleted it;
- events ``SuccessfulCreate`` "create Pod <pod> in StatefulSet <set> successful" (and
  ``SuccessfulDelete``), the controller's words;
- status ``observedGeneration``, ``replicas``, ``readyReplicas``, ``availableReplicas``,
  ``currentReplicas``, ``updatedReplicas``, ``currentRevision``, ``updateRevision``,
  ``collisionCount`` — what ``kubectl rollout status statefulset`` waits on.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kubemu.controllers.deployments import template_hash
from kubemu.controllers.replicasets import is_ready
from kubemu.machinery import events
from kubemu.machinery.loop import ControllerLoop, itself, owner_of
from kubemu.storage.errors import ApiError

if TYPE_CHECKING:
    from kubemu.storage.store import Store

COMPONENT = "statefulset-controller"
KEY = "statefulsets.apps"
HASH = "controller-revision-hash"
POD_NAME = "statefulset.kubernetes.io/pod-name"
POD_INDEX = "apps.kubernetes.io/pod-index"


class StatefulSetController:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.loop = ControllerLoop(
            store, "statefulset", {KEY: itself, "pods": owner_of("StatefulSet")}, self.reconcile
        )

    async def run(self) -> None:
        await self.loop.run()

    def reconcile(self, namespace: str, name: str) -> float | None:
        sts = self.store.try_get(KEY, namespace, name)
        if sts is None or sts["metadata"].get("deletionTimestamp"):
            return None
        spec = sts["spec"]
        revision = f"{name}-{template_hash(spec.get('template') or {})}"
        start = int((spec.get("ordinals") or {}).get("start", 0))
        wanted = range(start, start + int(spec.get("replicas", 1)))
        pods = self._pods(sts)
        ordered = spec.get("podManagementPolicy", "OrderedReady") == "OrderedReady"
        for ordinal in wanted:  # make the missing, in order; a failed one is made again
            pod = pods.get(ordinal)
            if pod is not None and (pod.get("status") or {}).get("phase") == "Failed":
                self._delete(sts, pod)
                pod = pods[ordinal] = None
            if pod is None:
                pods[ordinal] = self._create(sts, ordinal, revision)
                if ordered:
                    break
            elif ordered and not _running_and_ready(pod):
                break  # OrderedReady: nothing after a pod that is not yet Ready
        surplus = sorted((o for o in pods if o not in wanted and pods[o]), reverse=True)
        for ordinal in surplus[:1] if ordered else surplus:
            self._delete(sts, pods.pop(ordinal))
        self._roll(sts, pods, wanted, revision)
        self._write_status(sts, [p for o, p in pods.items() if p is not None], revision)
        return None

    def _pods(self, sts: Mapping[str, Any]) -> dict[int, dict[str, Any] | None]:
        """The set's live pods by ordinal (its own, by owner uid; not those being deleted)."""
        uid, prefix = sts["metadata"]["uid"], f"{sts['metadata']['name']}-"
        found: dict[int, dict[str, Any] | None] = {}
        for key, obj in self.store.collector.dependents(uid):
            meta = obj["metadata"]
            if key != "pods" or meta.get("deletionTimestamp"):
                continue
            suffix = str(meta["name"])[len(prefix) :]
            if str(meta["name"]).startswith(prefix) and suffix.isdigit():
                found[int(suffix)] = obj
        return found

    def _create(self, sts: Mapping[str, Any], ordinal: int, revision: str) -> dict[str, Any]:
        meta, spec = sts["metadata"], sts["spec"]
        template = copy.deepcopy(spec.get("template") or {})
        name = f"{meta['name']}-{ordinal}"
        labels = dict((template.get("metadata") or {}).get("labels") or {})
        labels.update({HASH: revision, POD_NAME: name, POD_INDEX: str(ordinal)})
        pod_spec = template.get("spec") or {}
        pod_spec["hostname"] = name
        if spec.get("serviceName"):
            pod_spec["subdomain"] = spec["serviceName"]
        pod_spec["volumes"] = list(pod_spec.get("volumes") or []) + self._claims(sts, name)
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": meta["namespace"],
                "labels": labels,
                "annotations": dict((template.get("metadata") or {}).get("annotations") or {}),
                "ownerReferences": [_owner(sts)],
            },
            "spec": pod_spec,
        }
        created = self.store.create("pods", pod)
        note = f"create Pod {name} in StatefulSet {meta['name']} successful"
        events.record(self.store, sts, "Normal", "SuccessfulCreate", note, COMPONENT)
        return created

    def _claims(self, sts: Mapping[str, Any], pod: str) -> list[dict[str, Any]]:
        """A claim per volumeClaimTemplate (``<template>-<pod>``, made once and kept), and
        the pod's volumes that mount them."""
        volumes = []
        namespace = sts["metadata"]["namespace"]
        for template in sts["spec"].get("volumeClaimTemplates") or []:
            base = str((template.get("metadata") or {}).get("name"))
            claim = f"{base}-{pod}"
            if self.store.try_get("persistentvolumeclaims", namespace, claim) is None:
                labels = dict((template.get("metadata") or {}).get("labels") or {})
                body = {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "metadata": {"name": claim, "namespace": namespace, "labels": labels},
                    "spec": copy.deepcopy(template.get("spec") or {}),
                }
                self.store.create("persistentvolumeclaims", body)
            volumes.append({"name": base, "persistentVolumeClaim": {"claimName": claim}})
        return volumes

    def _delete(self, sts: Mapping[str, Any], pod: Mapping[str, Any] | None) -> None:
        if pod is None:
            return
        meta = pod["metadata"]
        try:
            self.store.delete("pods", meta["namespace"], meta["name"])
        except ApiError:
            return  # already gone
        note = f"delete Pod {meta['name']} in StatefulSet {sts['metadata']['name']} successful"
        events.record(self.store, sts, "Normal", "SuccessfulDelete", note, COMPONENT)

    def _roll(
        self,
        sts: Mapping[str, Any],
        pods: dict[int, dict[str, Any] | None],
        wanted: range,
        revision: str,
    ) -> None:
        """RollingUpdate: the highest pod at an old revision (at or above the partition)
        is deleted — to be made again at the new one — once every pod is Ready."""
        strategy = sts["spec"].get("updateStrategy") or {}
        if strategy.get("type", "RollingUpdate") != "RollingUpdate":
            return
        live = [pods.get(o) for o in wanted]
        if any(p is None or not _running_and_ready(p) for p in live):
            return
        partition = int((strategy.get("rollingUpdate") or {}).get("partition", 0))
        for ordinal in sorted(wanted, reverse=True):
            pod = pods.get(ordinal)
            if ordinal >= partition and pod is not None and _revision(pod) != revision:
                self._delete(sts, pod)
                pods[ordinal] = None
                return

    def _write_status(
        self, sts: Mapping[str, Any], pods: list[dict[str, Any]], revision: str
    ) -> None:
        old = sts.get("status") or {}
        updated = sum(1 for p in pods if _revision(p) == revision)
        replicas = int(sts["spec"].get("replicas", 1))
        current = old.get("currentRevision") or revision
        if updated == replicas == len(pods):
            current = revision  # the rollout is complete: the update is the current revision
        ready = sum(1 for p in pods if is_ready(p))
        status = {
            "observedGeneration": sts["metadata"].get("generation", 1),
            "replicas": len(pods),
            "readyReplicas": ready,
            "availableReplicas": ready,  # minReadySeconds taken as ready, as for ReplicaSets
            "currentReplicas": sum(1 for p in pods if _revision(p) == current),
            "updatedReplicas": updated,
            "currentRevision": current,
            "updateRevision": revision,
            "collisionCount": 0,
        }
        optional = ("readyReplicas", "availableReplicas", "currentReplicas", "updatedReplicas")
        status = {k: v for k, v in status.items() if v or k not in optional}

        def change(draft: dict[str, Any]) -> None:
            draft["status"] = status

        if old != status:
            meta = sts["metadata"]
            self.store.mutate(KEY, meta["namespace"], meta["name"], change, "status")


def _owner(sts: Mapping[str, Any]) -> dict[str, Any]:
    meta = sts["metadata"]
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": meta["name"],
            "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}  # fmt: skip


def _revision(pod: Mapping[str, Any]) -> str:
    return str((pod["metadata"].get("labels") or {}).get(HASH) or "")


def _running_and_ready(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and is_ready(pod)
