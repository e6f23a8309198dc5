"""Every object a run creates, as plain dicts (pure: no API calls, no environment reads).

A run is a namespace (its own, or the campaign's), the Secrets its models need, Datashim
``Dataset`` objects when asked for, and per worker a Deployment of one replica plus a
Service. The server container comes from the adapter (``ServerAdapter.container``); this
module adds the run's labels, the model's volumes, resources (requests and limits, GPUs,
MIG slices), placement, and the startup, readiness and liveness probes. ``testbed plan
--manifests DIR`` writes exactly these objects; the backend applies them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from kubefacts.gpu import GPU, mig_profile, mig_resource
from kubefacts.quantity import cpu_quantity, memory_quantity
from testbed.backends.kubernetes.names import (
    run_labels,
    server_image,
    worker_labels,
    worker_name,
)
from testbed.backends.kubernetes.weights import datasets, pod_model, run_secrets
from testbed.config.backend_settings import KubernetesSettings
from testbed.config.deployments import (
    AnyDeployment,
    Placement,
    Resources,
    ServerDeployment,
    Toleration,
)
from testbed.servers.adapters import adapter_for

DATASET_API = "datashim.io/v1alpha1"
DATASHIM_LABEL = "monitor-pods-datasets"
PROBE_PERIOD_S = 1  # the kubelet probes this often until ready (s)
#: Server kinds that are no pod of testbed's: a URL, or a stack (backends.kubernetes.stack).


def resources(asked: Resources) -> dict[str, dict[str, str]]:
    """Requests and limits: tgis-tester's rules (limits default to 2 × CPU and 4 × memory);
    ``gpu: N`` → ``nvidia.com/gpu``; MIG ``{mig_1g_10gb: 1}`` → ``nvidia.com/mig-1g.10gb``."""
    cpu, memory = asked.cpu, asked.memory_gb
    limit_cpu = asked.limit_cpu or 2 * cpu
    limit_memory = asked.limit_memory_gb or 4 * memory
    requests = {"cpu": cpu_quantity(cpu), "memory": memory_quantity(memory)}
    limits = {
        "cpu": cpu_quantity(max(limit_cpu, cpu)),
        "memory": memory_quantity(max(limit_memory, memory)),
    }
    gpu = asked.gpu
    devices: dict[str, str] = {}
    if isinstance(gpu, dict):
        for key, count in sorted(gpu.items()):
            profile = mig_profile(key)
            if profile:
                devices[mig_resource(profile)] = str(count)
    elif gpu:
        devices[GPU] = str(gpu)
    # Extended resources must have request == limit.
    return {"requests": {**requests, **devices}, "limits": {**limits, **devices}}


def namespace(name: str, run_id: str, datashim: bool) -> dict[str, Any]:
    labels = run_labels(run_id)
    if datashim:
        labels[DATASHIM_LABEL] = "enabled"
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def secret(name: str, ns: str, run_id: str, data: Mapping[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": ns, "labels": run_labels(run_id)},
        "type": "Opaque",
        "stringData": dict(data),
    }


def dataset(spec: Mapping[str, Any], ns: str, run_id: str, secret_name: str) -> dict[str, Any]:
    """A Datashim Dataset over a bucket (seed 004's ``model-weights``)."""
    return {
        "apiVersion": DATASET_API,
        "kind": "Dataset",
        "metadata": {"name": spec["name"], "namespace": ns, "labels": run_labels(run_id)},
        "spec": {
            "local": {
                "type": "COS",
                "bucket": spec["bucket"],
                "endpoint": spec["endpoint"],
                "secret-name": secret_name,
                "readonly": "true",
            }
        },
    }


def _probe(path: str, port: int, failures: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": port},
        "periodSeconds": PROBE_PERIOD_S,
        "timeoutSeconds": 5,
        "failureThreshold": failures,
    }


def server_container(
    deployment: ServerDeployment, backend: KubernetesSettings, model_argument: str
) -> dict[str, Any]:
    """The adapter's container with image choice, resources, probes and CPU-only env."""
    adapter = adapter_for(deployment.server)
    image = server_image(deployment, backend)
    spec = adapter.container(deployment.model_copy(update={"image": image}), model_argument)
    spec["resources"] = resources(deployment.resources)
    env = list(spec.get("env") or [])
    if not deployment.resources.gpu and not any(e["name"] == "CUDA_VISIBLE_DEVICES" for e in env):
        env.append({"name": "CUDA_VISIBLE_DEVICES", "value": "-1"})  # gpu: null → no device
    spec["env"] = sorted(env, key=lambda e: str(e["name"]))
    path, port = adapter.readiness_path, adapter.container_port
    # Startup covers the whole startup timeout; liveness starts only after it succeeded,
    # so a slow model load is never killed as "dead".
    startup = max(1, math.ceil(deployment.startup_timeout_s / PROBE_PERIOD_S))
    spec["startupProbe"] = _probe(path, port, startup)
    spec["readinessProbe"] = _probe(path, port, 3)
    spec["livenessProbe"] = {**_probe(path, port, 5), "periodSeconds": 10}
    spec["imagePullPolicy"] = "IfNotPresent"
    return spec


def worker(
    run_id: str, worker_id: str, deployment: ServerDeployment, backend: KubernetesSettings, ns: str
) -> list[dict[str, Any]]:
    """A worker's Deployment (one replica) and Service."""
    name = worker_name(worker_id)
    labels = worker_labels(run_id, worker_id)
    model = pod_model(deployment, backend)
    container = server_container(deployment, backend, model.argument)
    container["env"] = sorted([*container["env"], *model.env], key=lambda e: str(e["name"]))
    if model.mounts:
        container["volumeMounts"] = model.mounts
    pod: dict[str, Any] = {
        "containers": [container],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 10,
        "automountServiceAccountToken": False,
        **placement(deployment.placement),
    }
    if model.init_containers:
        pod["initContainers"] = model.init_containers
    if model.volumes:
        pod["volumes"] = model.volumes
    meta = {"name": name, "namespace": ns, "labels": labels}
    template_meta: dict[str, Any] = {"labels": {**labels, **model.labels}}
    annotations = deployment.placement.pod_annotations
    if annotations:
        template_meta["annotations"] = dict(annotations)
    return [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta,
            "spec": {
                "replicas": 1,
                "strategy": {"type": "Recreate"},  # never two pods holding the same GPUs
                "selector": {"matchLabels": labels},
                "template": {"metadata": template_meta, "spec": pod},
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta,
            "spec": {
                "selector": labels,
                "ports": [
                    {"name": p["name"], "port": p["containerPort"], "targetPort": p["name"]}
                    for p in container["ports"]
                ],
            },
        },
    ]


def placement(placement: Placement) -> dict[str, Any]:
    """A pod spec's scheduling fields from a deployment's ``placement:`` section."""
    out: dict[str, Any] = {}
    if placement.node_selector:
        out["nodeSelector"] = dict(placement.node_selector)
    if placement.tolerations:
        out["tolerations"] = [_toleration(t) for t in placement.tolerations]
    if placement.priority_class:
        out["priorityClassName"] = placement.priority_class
    if placement.service_account:
        out["serviceAccountName"] = placement.service_account
        out["automountServiceAccountToken"] = True  # the user asked for this identity
    if placement.image_pull_secrets:
        out["imagePullSecrets"] = [{"name": n} for n in placement.image_pull_secrets]
    return out


def _toleration(t: Toleration) -> dict[str, Any]:
    names = {"toleration_seconds": "tolerationSeconds"}
    return {names.get(k, k): v for k, v in t.model_dump().items() if v is not None}


def run_objects(
    run_id: str,
    ns: str,
    own_namespace: bool,
    workers: Mapping[str, AnyDeployment],
    backend: KubernetesSettings,
    reveal: Callable[[str], str],
) -> list[dict[str, Any]]:
    """Every object of a run, in creation order: namespace, Secrets, Datasets, workers."""
    deployments = [d for d in workers.values() if isinstance(d, ServerDeployment)]
    objects: list[dict[str, Any]] = []
    if own_namespace:
        objects.append(namespace(ns, run_id, backend.datashim))
    secrets = run_secrets(deployments, backend, reveal)
    objects += [secret(name, ns, run_id, data) for name, data in secrets]
    s3_secret = next((name for name, _ in secrets if name == "testbed-s3"), "testbed-s3")
    objects += [dataset(spec, ns, run_id, s3_secret) for spec in datasets(deployments, backend)]
    for worker_id, deployment in workers.items():
        if isinstance(deployment, ServerDeployment):
            objects += worker(run_id, worker_id, deployment, backend, ns)
    return objects
