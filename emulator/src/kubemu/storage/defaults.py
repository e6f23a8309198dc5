"""What the real API server fills in and checks per kind when an object is created.

Defaulting follows the fields controllers and kubectl read (a pod's ``restartPolicy``,
``schedulerName``; a Deployment's strategy; a Job's generated selector; a Service's
cluster IP; a PVC bound at once). Validation covers the mistakes a manifest generator can
make and the server answers with 422: no containers, a selector that does not select its
template, a missing image, a ConfigMap or Secret over 1 MiB of data
(:mod:`kubefacts.limits`).
"""

from __future__ import annotations

import base64
import itertools
from collections.abc import Callable
from typing import Any

from kubefacts.limits import MAX_DATA_BYTES, too_long
from kubemu.storage import crds
from kubemu.storage.meta import normalized_time

Errors = list[tuple[str, str]]

_cluster_ips = itertools.count(10)


def _pod_spec(spec: dict[str, Any], where: str) -> Errors:
    errors: Errors = []
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("serviceAccountName", spec.get("serviceAccount") or "default")
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        return [(f"{where}.containers", "Required value")]
    for group in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(group) or []):
            path = f"{where}.{group}[{i}]"
            if not isinstance(container, dict) or not container.get("name"):
                errors.append((f"{path}.name", "Required value"))
                continue
            if not container.get("image"):
                errors.append((f"{path}.image", "Required value"))
                continue
            image = str(container["image"])
            tagged = ":" in image.rsplit("/", 1)[-1] or "@" in image
            latest = image.endswith(":latest") or not tagged
            container.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")
            container.setdefault("terminationMessagePath", "/dev/termination-log")
            container.setdefault("terminationMessagePolicy", "File")
            resources = container.setdefault("resources", {})
            _quantities_as_text(resources)
            for port in container.get("ports") or []:
                if isinstance(port, dict):
                    port.setdefault("protocol", "TCP")
    return errors


def _quantities_as_text(resources: Any) -> None:
    """The server stores quantities as strings (``2`` → ``"2"``): clients parse them so."""
    if not isinstance(resources, dict):
        return
    for part in ("limits", "requests"):
        amounts = resources.get(part)
        if isinstance(amounts, dict):
            for name, value in amounts.items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    amounts[name] = str(value)


def _pod(obj: dict[str, Any]) -> Errors:
    errors = _pod_spec(obj.setdefault("spec", {}), "spec")
    status = obj.setdefault("status", {})
    status.setdefault("phase", "Pending")
    status.setdefault("qosClass", _qos(obj["spec"]))
    return errors


def _qos(spec: dict[str, Any]) -> str:
    containers = spec.get("containers") or []
    resources = [c.get("resources") or {} for c in containers if isinstance(c, dict)]
    if not any(r.get("requests") or r.get("limits") for r in resources):
        return "BestEffort"
    guaranteed = all(
        r.get("limits", {}).get(k) is not None
        and r.get("requests", {}).get(k, r["limits"][k]) == r["limits"][k]
        for r in resources
        for k in ("cpu", "memory")
    )
    return "Guaranteed" if guaranteed else "Burstable"


def _selects_template(obj: dict[str, Any]) -> Errors:
    spec = obj.get("spec") or {}
    selector = (spec.get("selector") or {}).get("matchLabels") or {}
    if not spec.get("selector"):
        return [("spec.selector", "Required value")]
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    if any(labels.get(k) != v for k, v in selector.items()):
        return [
            (
                "spec.template.metadata.labels",
                "Invalid value: `selector` does not match template `labels`",
            )
        ]
    return []


def _workload(obj: dict[str, Any]) -> Errors:
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    errors = _selects_template(obj)
    template = spec.setdefault("template", {})
    return errors + _pod_spec(template.setdefault("spec", {}), "spec.template.spec")


def _deployment(obj: dict[str, Any]) -> Errors:
    spec = obj.setdefault("spec", {})
    spec.setdefault(
        "strategy",
        {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
    )
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    return _workload(obj)


def _statefulset(obj: dict[str, Any]) -> Errors:
    """The defaults ``SetDefaults_StatefulSet`` writes, and its two enums checked."""
    spec = obj.setdefault("spec", {})
    policy = spec.setdefault("podManagementPolicy", "OrderedReady")
    if policy not in ("OrderedReady", "Parallel"):
        return [("spec.podManagementPolicy", f'Unsupported value: "{policy}": supported'
                 ' values: "OrderedReady", "Parallel"')]  # fmt: skip
    strategy = spec.setdefault("updateStrategy", {"type": "RollingUpdate"})
    if strategy.setdefault("type", "RollingUpdate") == "RollingUpdate":
        strategy.setdefault("rollingUpdate", {}).setdefault("partition", 0)
    elif strategy["type"] != "OnDelete":
        return [("spec.updateStrategy.type", f'Unsupported value: "{strategy["type"]}":'
                 ' supported values: "OnDelete", "RollingUpdate"')]  # fmt: skip
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault(
        "persistentVolumeClaimRetentionPolicy", {"whenDeleted": "Retain", "whenScaled": "Retain"}
    )
    obj["status"] = {"replicas": 0, "availableReplicas": 0}
    return _workload(obj)


DAEMONSET_COUNTS = (
    "currentNumberScheduled",
    "numberMisscheduled",
    "desiredNumberScheduled",
    "numberReady",
)


def _daemonset(obj: dict[str, Any]) -> Errors:
    spec = obj.setdefault("spec", {})
    strategy = spec.setdefault("updateStrategy", {"type": "RollingUpdate"})
    if strategy.get("type", "RollingUpdate") == "RollingUpdate":
        strategy.setdefault("type", "RollingUpdate")
        rolling = strategy.setdefault("rollingUpdate", {})
        rolling.setdefault("maxUnavailable", 1)
        rolling.setdefault("maxSurge", 0)
    elif strategy.get("type") != "OnDelete":
        return [
            (
                "spec.updateStrategy.type",
                f'Unsupported value: "{strategy.get("type")}": supported values: "OnDelete",'
                ' "RollingUpdate"',
            )
        ]
    spec.setdefault("revisionHistoryLimit", 10)
    # These four counts are not omitempty in apps/v1: a new DaemonSet shows them as zero.
    obj["status"] = dict.fromkeys(DAEMONSET_COUNTS, 0)
    errors = _selects_template(obj)
    template = spec.setdefault("template", {})
    return errors + _pod_spec(template.setdefault("spec", {}), "spec.template.spec")


def _job(obj: dict[str, Any]) -> Errors:
    spec = obj.setdefault("spec", {})
    for key, value in (("parallelism", 1), ("completions", 1), ("backoffLimit", 6)):
        spec.setdefault(key, value)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    template = spec.setdefault("template", {})
    tmeta = template.setdefault("metadata", {})
    if not spec.get("manualSelector"):
        # The server generates the selector from the Job's uid, as batch/v1 does.
        uid, name = obj["metadata"]["uid"], obj["metadata"]["name"]
        generated = {"batch.kubernetes.io/controller-uid": uid, "controller-uid": uid}
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
        tmeta["labels"] = {
            **(tmeta.get("labels") or {}),
            **generated,
            "batch.kubernetes.io/job-name": name,
            "job-name": name,
        }
    tspec = template.setdefault("spec", {})
    if tspec.get("restartPolicy") not in ("Never", "OnFailure"):
        return [
            (
                "spec.template.spec.restartPolicy",
                'Unsupported value: "Always": supported values: "OnFailure", "Never"',
            )
        ]
    return _selects_template(obj) + _pod_spec(tspec, "spec.template.spec")


def _service(obj: dict[str, Any]) -> Errors:
    spec = obj.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if spec.get("clusterIP") != "None":
        n = next(_cluster_ips)
        spec.setdefault("clusterIP", f"10.96.{n // 250 % 250}.{n % 250 + 1}")
        spec["clusterIPs"] = [spec["clusterIP"]]
    for port in spec.get("ports") or []:
        port.setdefault("protocol", "TCP")
        port.setdefault("targetPort", port.get("port"))
    obj.setdefault("status", {"loadBalancer": {}})
    return []


def _secret(obj: dict[str, Any]) -> Errors:
    obj.setdefault("type", "Opaque")
    string_data = obj.pop("stringData", None) or {}
    data = obj.setdefault("data", {})
    for key, value in string_data.items():
        data[key] = base64.b64encode(str(value).encode()).decode()
    return _secret_size(obj)


def _secret_size(obj: dict[str, Any]) -> Errors:
    """A Secret's decoded data may hold 1 MiB (``ValidateSecret``: the error is on ``data``)."""
    if _decoded_size(obj.get("data")) > MAX_DATA_BYTES:
        return [("data", too_long(MAX_DATA_BYTES))]
    return []


def _configmap_size(obj: dict[str, Any]) -> Errors:
    """A ConfigMap's data and binaryData together may hold 1 MiB; ``ValidateConfigMap``
    puts the error on the whole object (``field.NewPath("")``, which prints as ``[]``)."""
    data = obj.get("data") or {}
    size = sum(len(str(v).encode()) for v in data.values()) if isinstance(data, dict) else 0
    if size + _decoded_size(obj.get("binaryData")) > MAX_DATA_BYTES:
        return [("[]", too_long(MAX_DATA_BYTES))]
    return []


def _decoded_size(values: Any) -> int:
    """Bytes of base64 values once decoded (what the server stores and counts)."""
    if not isinstance(values, dict):
        return 0
    total = 0
    for value in values.values():
        text = str(value)
        try:
            total += len(base64.b64decode(text))
        except ValueError:  # not base64: the decoder's business, count what was sent
            total += len(text.encode())
    return total


def _namespace(obj: dict[str, Any]) -> Errors:
    name = obj["metadata"]["name"]
    obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = name
    obj.setdefault("spec", {})["finalizers"] = ["kubernetes"]
    obj["status"] = {"phase": "Active"}
    return []


def _pvc(obj: dict[str, Any]) -> Errors:
    # No storage provisioner to wait for: every claim is bound to a volume at once.
    spec = obj.setdefault("spec", {})
    spec.setdefault("volumeMode", "Filesystem")
    spec.setdefault("volumeName", f"pvc-{obj['metadata']['uid']}")
    request = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    if request is None:
        return [("spec.resources.requests[storage]", "Required value")]
    obj["status"] = {
        "phase": "Bound",
        "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
        "capacity": {"storage": request},
    }
    return []


def _event(obj: dict[str, Any]) -> Errors:
    if not obj.get("involvedObject"):
        return [("involvedObject", "Required value")]
    obj.setdefault("type", "Normal")
    _event_times(obj)
    return []


def _event_times(obj: dict[str, Any]) -> None:
    for name, micro in (("eventTime", True), ("firstTimestamp", False), ("lastTimestamp", False)):
        if obj.get(name):
            obj[name] = normalized_time(obj[name], micro)
    series = obj.get("series")
    if isinstance(series, dict) and series.get("lastObservedTime"):
        series["lastObservedTime"] = normalized_time(series["lastObservedTime"], True)


PREPARE: dict[str, Callable[[dict[str, Any]], Errors]] = {
    "pods": _pod,
    "deployments.apps": _deployment,
    "replicasets.apps": _workload,
    "daemonsets.apps": _daemonset,
    "statefulsets.apps": _statefulset,
    "jobs.batch": _job,
    "services": _service,
    "secrets": _secret,
    "configmaps": _configmap_size,
    "namespaces": _namespace,
    "persistentvolumeclaims": _pvc,
    "events": _event,
    crds.KEY: crds.prepare,
}


def prepare_create(key: str, obj: dict[str, Any]) -> Errors:
    """Fill in defaults of a new object in place; the validation errors found."""
    prepare = PREPARE.get(key)
    return prepare(obj) if prepare else []


def validate_update(key: str, obj: dict[str, Any]) -> Errors:
    """Checks an update must pass (the template of a workload must still match, a
    ConfigMap's or a Secret's data must still fit)."""
    if key in ("deployments.apps", "replicasets.apps", "daemonsets.apps", "statefulsets.apps",
               "jobs.batch"):  # fmt: skip
        return _selects_template(obj)
    if key == "configmaps":
        return _configmap_size(obj)
    if key == "secrets":
        return _secret_size(obj)
    if key == "events":
        _event_times(obj)
    if key == "pods" and not (obj.get("spec") or {}).get("containers"):
        return [("spec.containers", "Required value")]
    return []
