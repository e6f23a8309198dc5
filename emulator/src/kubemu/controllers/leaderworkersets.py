"""LeaderWorkerSets (``leaderworkerset.x-k8s.io/v1``): llm-d's shape for multi-node and P/D.

A stand-in for the LWS controller (kubernetes-sigs/lws), as it lays a set out, for what
stacks use. It serves the CRD (as a cluster with LWS installed does) and, per set of
``replicas`` groups of ``leaderWorkerTemplate.size`` pods:

- a leader StatefulSet ``<name>`` (``Parallel``, ``serviceName: <name>``) whose pods
  ``<name>-<group>`` use ``leaderTemplate`` (else ``workerTemplate``), owned by the set;
- per leader pod, a worker StatefulSet ``<name>-<group>`` of ``size - 1`` pods
  ``<name>-<group>-<1…>`` (``ordinals.start: 1``) of ``workerTemplate``, owned by the leader
  pod (so a group goes with its leader);
- a headless Service ``<name>`` over every pod of the set: ``<pod>.<name>`` is each pod's
  DNS name (``subdomainPolicy: Shared``);
- the labels LWS sets — ``leaderworkerset.sigs.k8s.io/name``, ``group-index``,
  ``worker-index`` (0 for the leader), ``group-key``, ``template-revision-hash`` — and the
  annotations ``size`` and (workers) ``leader-name``; the workers' environment
  ``LWS_LEADER_ADDRESS`` (``<name>-<group>.<name>.<namespace>``), ``LWS_GROUP_SIZE``.
  Labels the real pod webhook adds at admission are added here right after creation;
- status ``replicas``, ``readyReplicas`` (groups whose every pod is Ready),
  ``updatedReplicas``, ``hpaPodSelector`` and the conditions ``Available`` (True, reason
  ``AllGroupsReady``, once every group is ready) and ``Progressing``.

Not played: rolling updates of groups, ``restartPolicy`` (a failed pod is made again alone),
``startupPolicy``, subgroups, exclusive placement.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kubefacts.times import now
from kubemu.controllers.deployments import template_hash
from kubemu.controllers.replicasets import is_ready
from kubemu.controllers.statefulsets import KEY as STS
from kubemu.machinery.loop import ControllerLoop, Key, itself

if TYPE_CHECKING:
    from kubemu.storage.store import Store

GROUP = "leaderworkerset.x-k8s.io"
KEY = f"leaderworkersets.{GROUP}"
CRD_KEY = "customresourcedefinitions.apiextensions.k8s.io"
_L = "leaderworkerset.sigs.k8s.io/"
NAME, GROUP_INDEX, WORKER_INDEX = _L + "name", _L + "group-index", _L + "worker-index"
GROUP_KEY, REVISION, SIZE, LEADER = (
    _L + "group-key",
    _L + "template-revision-hash",
    _L + "size",
    _L + "leader-name",
)


def crd() -> dict[str, Any]:
    """The LeaderWorkerSet CRD, served with its status and scale subresources."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": KEY},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": "LeaderWorkerSet",
                "plural": "leaderworkersets",
                "singular": "leaderworkerset",
                "listKind": "LeaderWorkerSetList",
                "shortNames": ["lws"],
            },
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                    "subresources": {
                        "status": {},
                        "scale": {
                            "specReplicasPath": ".spec.replicas",
                            "statusReplicasPath": ".status.replicas",
                            "labelSelectorPath": ".status.hpaPodSelector",
                        },
                    },
                }
            ],
        },
    }


def install(store: Store) -> LeaderWorkerSetController:
    """Serve the LeaderWorkerSet kind; the controller to run."""
    if store.try_get(CRD_KEY, None, KEY) is None:
        store.create(CRD_KEY, crd())
    return LeaderWorkerSetController(store)


def _by_set(obj: Mapping[str, Any]) -> list[Key]:
    meta = obj["metadata"]
    owner = (meta.get("labels") or {}).get(NAME)
    return [(str(meta.get("namespace")), str(owner))] if owner else []


class LeaderWorkerSetController:
    def __init__(self, store: Store) -> None:
        self.store = store
        watched = {KEY: itself, STS: _by_set, "pods": _by_set}
        self.loop = ControllerLoop(store, "leaderworkerset", watched, self.reconcile)

    async def run(self) -> None:
        await self.loop.run()

    def reconcile(self, namespace: str, name: str) -> float | None:
        lws = self.store.try_get(KEY, namespace, name)
        if lws is None or lws["metadata"].get("deletionTimestamp"):
            return None
        spec = lws.get("spec") or {}
        template = spec.get("leaderWorkerTemplate") or {}
        size = int(template.get("size", 1))
        revision = template_hash(template)
        if self.store.try_get("services", namespace, name) is None:
            self.store.create("services", _service(lws))
        if self.store.try_get(STS, namespace, name) is None:
            self.store.create(STS, _leader_set(lws, size, revision))
        pods, _ = self.store.list("pods", namespace, f"{NAME}={name}")
        leaders = {}
        for pod in pods:
            self._label(pod)
            if (pod["metadata"].get("labels") or {}).get(WORKER_INDEX) == "0":
                leaders[str(pod["metadata"]["name"])] = pod
        for leader in leaders.values():
            if size > 1 and self.store.try_get(STS, namespace, leader["metadata"]["name"]) is None:
                self.store.create(STS, _worker_set(lws, leader, size, revision))
        self._write_status(lws, pods, leaders, size)
        return None

    def _label(self, pod: Mapping[str, Any]) -> None:
        """The labels LWS's pod webhook gives a pod at admission: its group and its index
        in the group, read from its name (``<set>-<group>`` or ``<set>-<group>-<worker>``)."""
        meta = pod["metadata"]
        labels = meta.get("labels") or {}
        set_name = str(labels[NAME])
        parts = str(meta["name"])[len(set_name) + 1 :].split("-")
        wanted = {GROUP_INDEX: parts[0], WORKER_INDEX: parts[1] if len(parts) > 1 else "0"}
        if all(labels.get(k) == v for k, v in wanted.items()):
            return

        def change(draft: dict[str, Any]) -> None:
            draft["metadata"].setdefault("labels", {}).update(wanted)

        self.store.mutate("pods", meta["namespace"], meta["name"], change)

    def _write_status(
        self,
        lws: Mapping[str, Any],
        pods: list[dict[str, Any]],
        leaders: dict[str, dict[str, Any]],
        size: int,
    ) -> None:
        by_group: dict[str, list[dict[str, Any]]] = {}
        for pod in pods:
            if not pod["metadata"].get("deletionTimestamp"):
                group = (pod["metadata"].get("labels") or {}).get(GROUP_INDEX, "")
                by_group.setdefault(str(group), []).append(pod)
        ready = sum(1 for g in by_group.values() if len(g) == size and all(is_ready(p) for p in g))
        replicas = int((lws.get("spec") or {}).get("replicas", 1))
        name = lws["metadata"]["name"]
        done = ready == replicas
        old = lws.get("status") or {}
        conditions = [
            _condition(
                old,
                "Available",
                done,
                "AllGroupsReady" if done else "GroupsNotReady",
                "All replicas are ready" if done else f"{ready} of {replicas} groups ready",
            ),
            _condition(
                old,
                "Progressing",
                not done,
                "GroupsProgressing" if not done else "Ready",
                "Replicas are progressing" if not done else "All replicas are ready",
            ),
        ]
        status = {
            "replicas": len(leaders),
            "readyReplicas": ready,
            "updatedReplicas": len(leaders),
            "hpaPodSelector": f"{NAME}={name},{WORKER_INDEX}=0",
            "conditions": conditions,
        }
        if status != old:
            meta = lws["metadata"]
            self.store.mutate(
                KEY, meta["namespace"], meta["name"], lambda o: {**o, "status": status}, "status"
            )


def _condition(
    old: Mapping[str, Any], kind: str, true: bool, reason: str, message: str
) -> dict[str, Any]:
    """A condition, keeping its transition time while its status stays."""
    status = "True" if true else "False"
    before: dict[str, Any] = next(
        (c for c in old.get("conditions") or [] if c.get("type") == kind), {}
    )
    stamp = before.get("lastTransitionTime") if before.get("status") == status else None
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": stamp or now(),
    }


def _owner(obj: Mapping[str, Any], api_version: str, kind: str) -> dict[str, Any]:
    meta = obj["metadata"]
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _service(lws: Mapping[str, Any]) -> dict[str, Any]:
    meta = lws["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "labels": {NAME: meta["name"]},
            "ownerReferences": [_owner(lws, f"{GROUP}/v1", "LeaderWorkerSet")],
        },
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {NAME: meta["name"]},
        },
    }


def _stamped(template: Mapping[str, Any], labels: dict[str, str], notes: dict[str, str]) -> Any:
    out = copy.deepcopy(dict(template))
    meta = out.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), **labels}
    meta["annotations"] = {**(meta.get("annotations") or {}), **notes}
    return out


def _leader_set(lws: Mapping[str, Any], size: int, revision: str) -> dict[str, Any]:
    meta, spec = lws["metadata"], lws.get("spec") or {}
    template = spec.get("leaderWorkerTemplate") or {}
    chosen = template.get("leaderTemplate") or template.get("workerTemplate") or {}
    labels = {NAME: meta["name"], WORKER_INDEX: "0", REVISION: revision}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "labels": {NAME: meta["name"], REVISION: revision},
            "ownerReferences": [_owner(lws, f"{GROUP}/v1", "LeaderWorkerSet")],
        },
        "spec": {
            "replicas": int(spec.get("replicas", 1)),
            "serviceName": meta["name"],
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {NAME: meta["name"], WORKER_INDEX: "0"}},
            "template": _stamped(chosen, labels, {SIZE: str(size)}),
        },
    }


def _worker_set(
    lws: Mapping[str, Any], leader: Mapping[str, Any], size: int, revision: str
) -> dict[str, Any]:
    meta, spec = lws["metadata"], lws.get("spec") or {}
    leader_name = str(leader["metadata"]["name"])
    group = leader_name[len(meta["name"]) + 1 :]
    key = template_hash({"group": f"{meta['namespace']}/{leader_name}"})
    labels = {NAME: meta["name"], GROUP_INDEX: group, GROUP_KEY: key, REVISION: revision}
    worker = (spec.get("leaderWorkerTemplate") or {}).get("workerTemplate") or {}
    template = _stamped(worker, labels, {SIZE: str(size), LEADER: leader_name})
    env = [
        {
            "name": "LWS_LEADER_ADDRESS",
            "value": f"{leader_name}.{meta['name']}.{meta['namespace']}",
        },
        {"name": "LWS_GROUP_SIZE", "value": str(size)},
    ]
    for container in (template.get("spec") or {}).get("containers") or []:
        container["env"] = [*(container.get("env") or []), *env]
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": leader_name,
            "namespace": meta["namespace"],
            "labels": labels,
            "ownerReferences": [_owner(leader, "v1", "Pod")],
        },
        "spec": {
            "replicas": size - 1,
            "serviceName": meta["name"],
            "ordinals": {"start": 1},
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {NAME: meta["name"], GROUP_KEY: key}},
            "template": template,
        },
    }
