"""A run's state on a cluster, as kubectl would show it: ``get.txt`` (``kubectl get`` tables of
the run's objects), ``objects.yaml`` (``kubectl get -o yaml``: a v1 List; Secrets are left
out, their values must not reach a run directory), ``events.txt`` (``kubectl get events``)
and ``logs/<pod>/<container>.log`` (``kubectl logs``).

A run's objects are everything in its own namespace, or those labelled with the run in a
namespace the campaign names (a shared one holds other people's objects).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kubefacts import times
from testbed.clients.kube import Kube
from testbed.core.errors import ClusterAccessDenied, ClusterError, ClusterNotFound

#: Kinds dumped, in ``kubectl get all``'s spirit plus what a stack adds.
KINDS = (
    "Pod",
    "Deployment",
    "ReplicaSet",
    "Job",
    "Service",
    "ConfigMap",
    "PersistentVolumeClaim",
    "Secret",
)
LOG_TAIL_LINES = 2000


def capture(kube: Kube, namespace: str, selector: str | None, folder: Path) -> list[str]:
    """Dump the objects of ``namespace`` (those matching ``selector`` when given)."""
    folder.mkdir(parents=True, exist_ok=True)
    tables, kept, notes = [], [], []
    for kind in KINDS:
        try:
            items, _ = kube.list_objects(kind, namespace, selector)
        except ClusterNotFound:
            items = []
        except ClusterAccessDenied:  # least privilege: dump what may be read, say the rest
            notes.append(f"{kind}: not permitted to list")
            continue
        notes.append(f"{len(items)} {kind}(s)")
        if items:
            tables.append(_table(kind, items))
        if kind != "Secret":
            kept += items
    (folder / "get.txt").write_text("\n".join(tables) or f"No resources found in {namespace}.\n")
    listing = {"apiVersion": "v1", "kind": "List", "items": kept}
    (folder / "objects.yaml").write_text(yaml.safe_dump(listing, sort_keys=False))
    (folder / "events.txt").write_text(_events(kube, namespace))
    for pod in (i for i in kept if i.get("kind") == "Pod"):
        _logs(kube, namespace, pod, folder / "logs")
    return [f"namespace {namespace}: " + ", ".join(notes)]


def _age(meta: dict[str, Any]) -> str:
    try:
        return times.human_age(meta.get("creationTimestamp"))
    except ValueError:
        return "<unknown>"


def _row(kind: str, item: dict[str, Any]) -> list[str]:
    meta, spec, status = item["metadata"], item.get("spec") or {}, item.get("status") or {}
    name, age = meta["name"], _age(meta)
    if kind == "Pod":
        statuses = status.get("containerStatuses") or []
        ready = sum(1 for c in statuses if c.get("ready"))
        restarts = sum(int(c.get("restartCount") or 0) for c in statuses)
        phase = _pod_reason(status)
        total = len(spec.get("containers") or statuses)
        return [name, f"{ready}/{total}", phase, str(restarts), age, str(spec.get("nodeName", ""))]
    if kind in ("Deployment", "ReplicaSet"):
        want = spec.get("replicas", 1)
        return [
            name,
            f"{status.get('readyReplicas', 0)}/{want}",
            str(status.get("availableReplicas", 0)),
            age,
        ]
    if kind == "Service":
        ports = ",".join(
            f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in spec.get("ports") or []
        )
        return [
            name,
            str(spec.get("type", "ClusterIP")),
            str(spec.get("clusterIP", "")),
            ports,
            age,
        ]
    if kind == "Job":
        return [name, f"{status.get('succeeded', 0)}/{spec.get('completions', 1)}", age]
    if kind == "Secret":
        return [name, str(item.get("type", "Opaque")), str(len(item.get("data") or {})), age]
    return [name, age]


_HEADERS = {
    "Pod": ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "NODE"],
    "Deployment": ["NAME", "READY", "AVAILABLE", "AGE"],
    "ReplicaSet": ["NAME", "READY", "AVAILABLE", "AGE"],
    "Service": ["NAME", "TYPE", "CLUSTER-IP", "PORT(S)", "AGE"],
    "Job": ["NAME", "COMPLETIONS", "AGE"],
    "Secret": ["NAME", "TYPE", "DATA", "AGE"],
}


def _pod_reason(status: dict[str, Any]) -> str:
    """kubectl's STATUS column: a waiting or terminated container's reason, else the phase."""
    for c in status.get("containerStatuses") or []:
        state = c.get("state") or {}
        for key in ("waiting", "terminated"):
            reason = (state.get(key) or {}).get("reason")
            if reason:
                return str(reason)
    return str(status.get("phase", "Unknown"))


def _table(kind: str, items: list[dict[str, Any]]) -> str:
    rows = [_HEADERS.get(kind, ["NAME", "AGE"])] + [_row(kind, i) for i in items]
    rows[0] = [f"{rows[0][0]} ({kind.lower()})", *rows[0][1:]]
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    return "".join(
        "   ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() + "\n" for r in rows
    )


def _events(kube: Kube, namespace: str) -> str:
    try:
        items, _ = kube.list_objects("Event", namespace)
    except ClusterError as exc:
        return f"events not listed: {exc}\n"
    items.sort(key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
    rows = [["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]]
    for event in items:
        involved = event.get("involvedObject") or {}
        seen = str(event.get("lastTimestamp") or event.get("eventTime") or "")
        rows.append(
            [
                seen,
                str(event.get("type", "")),
                str(event.get("reason", "")),
                f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
                str(event.get("message", "")).replace("\n", " "),
            ]
        )
    widths = [max(len(r[c]) for r in rows) for c in range(4)]
    return "".join(
        "   ".join(v.ljust(w) for v, w in zip(r[:4], widths, strict=True)) + f"   {r[4]}\n"
        for r in rows
    )


def _logs(kube: Kube, namespace: str, pod: dict[str, Any], folder: Path) -> None:
    name = pod["metadata"]["name"]
    spec = pod.get("spec") or {}
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        try:
            text = kube.pod_log(name, namespace, container["name"], tail_lines=LOG_TAIL_LINES)
        except ClusterError as exc:
            text = f"log not read: {exc}\n"
        if text:
            (folder / name).mkdir(parents=True, exist_ok=True)
            (folder / name / f"{container['name']}.log").write_text(text)
