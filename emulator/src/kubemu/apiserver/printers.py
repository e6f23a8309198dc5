"""The built-in kinds' printers: the columns and row cells the real API server prints for each.

pods: NAME READY STATUS RESTARTS AGE, with IP and NODE for ``-o wide``; deployments,
replicasets, daemonsets, jobs, services, nodes, events, and the small kinds, as kubectl shows
them from a cluster. Ages are kubectl's ``HumanDuration``
(:func:`~kubefacts.times.human_age`). :mod:`.tables` answers with them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubefacts.times import human_age, parse_time

Obj = dict[str, Any]
Column = tuple[str, str, int]  # name, type, priority (1: only with -o wide)
Printer = tuple[tuple[Column, ...], Callable[[Obj], list[Any]]]


def _age(obj: Obj) -> str:
    return human_age(obj["metadata"].get("creationTimestamp"))


def _pod_status(pod: Obj) -> str:
    status = pod.get("status") or {}
    reason = status.get("reason") or status.get("phase") or "Unknown"
    init = pod["spec"].get("initContainers") or []
    for i, cs in enumerate(status.get("initContainerStatuses") or []):
        state = cs.get("state") or {}
        if state.get("terminated", {}).get("exitCode", 0) == 0 and "terminated" in state:
            continue
        if "terminated" in state:
            return "Init:" + (state["terminated"].get("reason") or "Error")
        waiting = state.get("waiting", {}).get("reason")
        if waiting and waiting != "PodInitializing":
            return f"Init:{waiting}"
        return f"Init:{i}/{len(init)}"
    for cs in reversed(status.get("containerStatuses") or []):
        state = cs.get("state") or {}
        if state.get("waiting", {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif state.get("terminated", {}).get("reason"):
            reason = state["terminated"]["reason"]
        elif "terminated" in state:
            code = state["terminated"].get("exitCode", 0)
            reason = f"ExitCode:{code}"
    if pod["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    return str(reason)


def _pod(pod: Obj) -> list[Any]:
    status = pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for cs in statuses if cs.get("ready"))
    restarts = sum(int(cs.get("restartCount", 0)) for cs in statuses)
    gates = pod["spec"].get("readinessGates") or []
    return [
        pod["metadata"]["name"],
        f"{ready}/{len(pod['spec'].get('containers') or [])}",
        _pod_status(pod),
        restarts,
        _age(pod),
        status.get("podIP") or "<none>",
        pod["spec"].get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        f"{len(gates)}" if gates else "<none>",
    ]


def _images(obj: Obj) -> list[str]:
    spec = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    containers = spec.get("containers") or []
    selector = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    return [
        ",".join(c.get("name", "") for c in containers),
        ",".join(c.get("image", "") for c in containers),
        ",".join(f"{k}={v}" for k, v in selector.items()) or "<none>",
    ]


def _deployment(obj: Obj) -> list[Any]:
    status = obj.get("status") or {}
    want = (obj.get("spec") or {}).get("replicas", 1)
    return [
        obj["metadata"]["name"],
        f"{status.get('readyReplicas', 0)}/{want}",
        status.get("updatedReplicas", 0),
        status.get("availableReplicas", 0),
        _age(obj),
        *_images(obj),
    ]


def _replicaset(obj: Obj) -> list[Any]:
    status = obj.get("status") or {}
    return [
        obj["metadata"]["name"],
        (obj.get("spec") or {}).get("replicas", 1),
        status.get("replicas", 0),
        status.get("readyReplicas", 0),
        _age(obj),
        *_images(obj),
    ]


def _statefulset(obj: Obj) -> list[Any]:
    status = obj.get("status") or {}
    ready = f"{status.get('readyReplicas', 0)}/{(obj.get('spec') or {}).get('replicas', 1)}"
    return [obj["metadata"]["name"], ready, _age(obj), *_images(obj)[:2]]


def _daemonset(obj: Obj) -> list[Any]:
    status = obj.get("status") or {}
    selector = ((obj.get("spec") or {}).get("template") or {}).get("spec", {}).get("nodeSelector")
    return [
        obj["metadata"]["name"],
        status.get("desiredNumberScheduled", 0),
        status.get("currentNumberScheduled", 0),
        status.get("numberReady", 0),
        status.get("updatedNumberScheduled", 0),
        status.get("numberAvailable", 0),
        ",".join(f"{k}={v}" for k, v in (selector or {}).items()) or "<none>",
        _age(obj),
        *_images(obj),
    ]


def _job(obj: Obj) -> list[Any]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    state = "Running"
    for name in ("Complete", "Failed", "Suspended", "FailureTarget"):
        if conditions.get(name) == "True":
            state = name
            break
    duration = ""
    if status.get("startTime"):
        end = status.get("completionTime")
        duration = human_age(status["startTime"], parse_time(end) if end else None)
    return [
        obj["metadata"]["name"],
        state,
        f"{status.get('succeeded', 0)}/{spec.get('completions', 1)}",
        duration,
        _age(obj),
        *_images(obj),
    ]


def _ports(obj: Obj) -> str:
    ports = (obj.get("spec") or {}).get("ports") or []
    text = []
    for p in ports:
        node_port = f":{p['nodePort']}" if p.get("nodePort") else ""
        text.append(f"{p.get('port')}{node_port}/{p.get('protocol', 'TCP')}")
    return ",".join(text) or "<none>"


def _service(obj: Obj) -> list[Any]:
    spec = obj.get("spec") or {}
    selector = spec.get("selector") or {}
    return [
        obj["metadata"]["name"],
        spec.get("type", "ClusterIP"),
        spec.get("clusterIP") or "<none>",
        ",".join(spec.get("externalIPs") or []) or "<none>",
        _ports(obj),
        _age(obj),
        ",".join(f"{k}={v}" for k, v in selector.items()) or "<none>",
    ]


def _node(obj: Obj) -> list[Any]:
    status = obj.get("status") or {}
    ready = {c.get("type"): c.get("status") for c in status.get("conditions") or []}.get("Ready")
    state = "Ready" if ready == "True" else "NotReady"
    if (obj.get("spec") or {}).get("unschedulable"):
        state += ",SchedulingDisabled"
    labels = obj["metadata"].get("labels") or {}
    roles = [k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/")]
    info = status.get("nodeInfo") or {}
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
    return [
        obj["metadata"]["name"],
        state,
        ",".join(roles) or "<none>",
        _age(obj),
        info.get("kubeletVersion", ""),
        addresses.get("InternalIP", "<none>"),
    ]


def _event(obj: Obj) -> list[Any]:
    involved = obj.get("involvedObject") or {}
    last = (
        obj.get("lastTimestamp") or obj.get("eventTime") or obj["metadata"].get("creationTimestamp")
    )
    return [
        human_age(str(last).split(".")[0].rstrip("Z") + "Z" if last else None),
        obj.get("type", ""),
        obj.get("reason", ""),
        f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
        obj.get("message", ""),
    ]


def _cols(*names: str, wide: tuple[str, ...] = ()) -> tuple[Column, ...]:
    typed = {
        "Restarts": "integer",
        "Up-to-date": "integer",
        "Available": "integer",
        "Desired": "integer",
        "Current": "integer",
        "Data": "integer",
        "Secrets": "integer",
    }
    return tuple((n, typed.get(n, "string"), 0) for n in names) + tuple(
        (n, "string", 1) for n in wide
    )


_MODES = {
    "ReadWriteOnce": "RWO",
    "ReadOnlyMany": "ROX",
    "ReadWriteMany": "RWX",
    "ReadWriteOncePod": "RWOP",
}

PRINTERS: dict[str, Printer] = {
    "pods": (
        _cols(
            "Name",
            "Ready",
            "Status",
            "Restarts",
            "Age",
            wide=("IP", "Node", "Nominated Node", "Readiness Gates"),
        ),
        _pod,
    ),
    "deployments.apps": (
        _cols(
            "Name",
            "Ready",
            "Up-to-date",
            "Available",
            "Age",
            wide=("Containers", "Images", "Selector"),
        ),
        _deployment,
    ),
    "replicasets.apps": (
        _cols(
            "Name", "Desired", "Current", "Ready", "Age", wide=("Containers", "Images", "Selector")
        ),
        _replicaset,
    ),
    "daemonsets.apps": (
        _cols(
            "Name",
            "Desired",
            "Current",
            "Ready",
            "Up-to-date",
            "Available",
            "Node Selector",
            "Age",
            wide=("Containers", "Images", "Selector"),
        ),
        _daemonset,
    ),
    "statefulsets.apps": (
        _cols("Name", "Ready", "Age", wide=("Containers", "Images")),
        _statefulset,
    ),
    "jobs.batch": (
        _cols(
            "Name",
            "Status",
            "Completions",
            "Duration",
            "Age",
            wide=("Containers", "Images", "Selector"),
        ),
        _job,
    ),
    "services": (
        _cols("Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age", wide=("Selector",)),
        _service,
    ),
    "nodes": (_cols("Name", "Status", "Roles", "Age", "Version", wide=("Internal-IP",)), _node),
    "namespaces": (
        _cols("Name", "Status", "Age"),
        lambda o: [o["metadata"]["name"], (o.get("status") or {}).get("phase", ""), _age(o)],
    ),
    "events": (_cols("Last Seen", "Type", "Reason", "Object", "Message"), _event),
    "secrets": (
        _cols("Name", "Type", "Data", "Age"),
        lambda o: [o["metadata"]["name"], o.get("type", ""), len(o.get("data") or {}), _age(o)],
    ),
    "configmaps": (
        _cols("Name", "Data", "Age"),
        lambda o: [
            o["metadata"]["name"],
            len(o.get("data") or {}) + len(o.get("binaryData") or {}),
            _age(o),
        ],
    ),
    "serviceaccounts": (
        _cols("Name", "Secrets", "Age"),
        lambda o: [o["metadata"]["name"], len(o.get("secrets") or []), _age(o)],
    ),
    "persistentvolumeclaims": (
        _cols("Name", "Status", "Volume", "Capacity", "Access Modes", "StorageClass", "Age"),
        lambda o: [
            o["metadata"]["name"],
            (o.get("status") or {}).get("phase", ""),
            (o.get("spec") or {}).get("volumeName", ""),
            ((o.get("status") or {}).get("capacity") or {}).get("storage", ""),
            ",".join(_MODES.get(m, m) for m in (o.get("status") or {}).get("accessModes") or []),
            (o.get("spec") or {}).get("storageClassName") or "<unset>",
            _age(o),
        ],
    ),
    "customresourcedefinitions.apiextensions.k8s.io": (
        _cols("Name", "Created At"),
        lambda o: [o["metadata"]["name"], o["metadata"].get("creationTimestamp", "")],
    ),
}


def name_and_age() -> Printer:
    """The printer of a kind with no columns of its own: NAME and AGE."""
    return _cols("Name", "Age"), lambda o: [o["metadata"]["name"], _age(o)]
