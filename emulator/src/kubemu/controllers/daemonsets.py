"""The DaemonSet controller: one pod of the template on every node that should run it.

A node should run the daemon when the template's ``nodeSelector``, required node affinity
and tolerations let it (the filters of :mod:`kubefacts.fit`, with the tolerations
the real controller adds to every daemon pod: not-ready, unreachable, the pressure taints,
unschedulable — a cordoned node keeps its daemon). Pods are created bound to their node
(``spec.nodeName``; the real controller pins them with a ``matchFields`` affinity the
default scheduler then honours — same placement), owned by the DaemonSet (the collector
deletes them with it), labelled ``controller-revision-hash`` with the template's hash.
Pods on nodes that no longer qualify, or on nodes gone, are deleted; a second pod on a
node too.

``updateStrategy`` ``RollingUpdate`` (the default, ``maxUnavailable: 1``): when the
template changes, old pods are deleted while fewer than ``maxUnavailable`` daemon pods are
unavailable, and each node gets its new pod on the next pass; ``OnDelete`` replaces a pod
only once someone deleted it. Status as the real controller writes it:
``desiredNumberScheduled``, ``currentNumberScheduled``, ``numberMisscheduled``,
``numberReady``, ``updatedNumberScheduled``, ``numberAvailable``, ``numberUnavailable``,
``observedGeneration`` — what ``kubectl rollout status daemonset`` waits on.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kubefacts.fit import HOSTNAME, NodeFacts, PodFacts, static_reason, with_hostname
from kubemu.controllers.deployments import template_hash
from kubemu.controllers.replicasets import (
    active_pods,
    create_pod,
    delete_pod,
    is_ready,
    pod_from_template,
)
from kubemu.machinery.loop import ControllerLoop, Key, itself, owner_of

if TYPE_CHECKING:
    from kubemu.storage.store import Store

COMPONENT = "daemonset-controller"
KEY = "daemonsets.apps"
HASH = "controller-revision-hash"
#: Tolerations the real controller adds to every daemon pod
#: (``util.AddOrUpdateDaemonPodTolerations``).
DAEMON_TOLERATIONS = tuple(
    {"key": f"node.kubernetes.io/{key}", "operator": "Exists", "effect": effect}
    for key, effect in (
        ("not-ready", "NoExecute"),
        ("unreachable", "NoExecute"),
        ("disk-pressure", "NoSchedule"),
        ("memory-pressure", "NoSchedule"),
        ("pid-pressure", "NoSchedule"),
        ("unschedulable", "NoSchedule"),
    )
)


class DaemonSetController:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.loop = ControllerLoop(
            store,
            "daemonset",
            {KEY: itself, "pods": owner_of("DaemonSet"), "nodes": self._every_daemonset},
            self.reconcile,
        )

    async def run(self) -> None:
        await self.loop.run()

    def _every_daemonset(self, _node: Mapping[str, Any]) -> list[Key]:
        """A node changed (added, labelled, tainted, gone): every DaemonSet looks again."""
        items, _ = self.store.list(KEY)
        return [(str(d["metadata"]["namespace"]), str(d["metadata"]["name"])) for d in items]

    def reconcile(self, namespace: str, name: str) -> float | None:
        ds = self.store.try_get(KEY, namespace, name)
        if ds is None or ds["metadata"].get("deletionTimestamp"):
            return None
        nodes = {n["metadata"]["name"]: n for n in self.store.list("nodes")[0]}
        should = {n for n, node in nodes.items() if _should_run(ds, node)}
        pods = active_pods(self.store, ds)
        by_node: dict[str, list[dict[str, Any]]] = {}
        for pod in pods:
            by_node.setdefault(str((pod.get("spec") or {}).get("nodeName") or ""), []).append(pod)
        wanted_hash = template_hash(ds["spec"].get("template") or {})
        for node_name, held in by_node.items():
            extra = held if node_name not in should else held[1:]
            for pod in extra:  # on a node that does not qualify, or a second one
                self._delete(ds, pod)
        kept = {n: held[0] for n, held in by_node.items() if n in should}
        self._roll(ds, kept, should, wanted_hash)
        for node_name in sorted(should - set(kept)):
            pod = pod_from_template(ds, "DaemonSet", "apps/v1")
            pod["metadata"]["labels"][HASH] = wanted_hash
            pod["spec"] = {**pod["spec"], "nodeName": node_name}
            pod["spec"]["tolerations"] = _tolerations(pod["spec"])
            kept[node_name] = create_pod(self.store, ds, pod, COMPONENT)
        self._write_status(ds, kept, should, len(pods) - len(kept), wanted_hash)
        return None

    def _roll(
        self,
        ds: Mapping[str, Any],
        kept: dict[str, dict[str, Any]],
        should: set[str],
        wanted_hash: str,
    ) -> None:
        """RollingUpdate: delete old pods while fewer than maxUnavailable are unavailable."""
        strategy = ds["spec"].get("updateStrategy") or {}
        if strategy.get("type", "RollingUpdate") != "RollingUpdate":
            return
        allowed = max_unavailable(strategy, len(should))
        unavailable = len(should - set(kept)) + sum(1 for p in kept.values() if not is_ready(p))
        old = [(n, p) for n, p in sorted(kept.items()) if _hash(p) != wanted_hash]
        old.sort(key=lambda item: is_ready(item[1]))  # unready old pods go first
        for node_name, pod in old:
            if not is_ready(pod):
                pass  # already unavailable: replacing it costs nothing
            elif unavailable >= allowed:
                break
            else:
                unavailable += 1
            self._delete(ds, pod)
            del kept[node_name]

    def _delete(self, ds: Mapping[str, Any], pod: Mapping[str, Any]) -> None:
        delete_pod(self.store, ds, pod, COMPONENT)

    def _write_status(
        self,
        ds: Mapping[str, Any],
        kept: dict[str, dict[str, Any]],
        should: set[str],
        misscheduled: int,
        wanted_hash: str,
    ) -> None:
        ready = sum(1 for p in kept.values() if is_ready(p))
        status = {
            "currentNumberScheduled": len(kept),
            "numberMisscheduled": misscheduled,
            "desiredNumberScheduled": len(should),
            "numberReady": ready,
            "observedGeneration": ds["metadata"].get("generation", 1),
            "updatedNumberScheduled": sum(1 for p in kept.values() if _hash(p) == wanted_hash),
            "numberAvailable": ready,
            "numberUnavailable": len(should) - ready,
        }
        # updated/available/unavailable are omitempty in apps/v1; the other counts are not
        optional = ("updatedNumberScheduled", "numberAvailable", "numberUnavailable")
        status = {k: v for k, v in status.items() if v or k not in optional}

        def change(draft: dict[str, Any]) -> None:
            draft["status"] = status

        if (ds.get("status") or {}) != status:
            meta = ds["metadata"]
            self.store.mutate(KEY, meta["namespace"], meta["name"], change, "status")


def max_unavailable(strategy: Mapping[str, Any], desired: int) -> int:
    """``rollingUpdate.maxUnavailable`` as a number of pods (a percentage rounds up; at
    least one, so a rollout always moves)."""
    value = (strategy.get("rollingUpdate") or {}).get("maxUnavailable", 1)
    if isinstance(value, str) and value.endswith("%"):
        return max(1, math.ceil(desired * float(value[:-1]) / 100))
    return max(1, int(value))


def _should_run(ds: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    spec = dict(((ds["spec"].get("template") or {}).get("spec")) or {})
    spec["tolerations"] = _tolerations(spec)
    pod, facts = PodFacts.of({"spec": spec}), NodeFacts.of(node)
    if pod.host_pinned:  # NodeFacts leaves the hostname label out unless asked
        hostname = (node["metadata"].get("labels") or {}).get(HOSTNAME, node["metadata"]["name"])
        facts = with_hostname(facts, str(hostname))
    return static_reason(pod, facts) is None


def _tolerations(spec: Mapping[str, Any]) -> list[Any]:
    own = list(spec.get("tolerations") or [])
    return own + [t for t in DAEMON_TOLERATIONS if t not in own]


def _hash(pod: Mapping[str, Any]) -> str:
    return str((pod["metadata"].get("labels") or {}).get(HASH) or "")
