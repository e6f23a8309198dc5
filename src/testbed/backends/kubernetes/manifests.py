"""Every object a run creates, as plain dicts (pure: no API calls, no environment reads).

A run is a namespace (its own, or the campaign's), the Secrets its models need, Datashim
``Dataset`` objects when asked for, and per worker a Deployment of one replica plus a
Service. The server container, the model's volumes, init containers and pod labels come
resolved in the worker's :class:`~testbed.backends.kubernetes.launch.ServerLaunch`; this
module adds the run's labels and the placement. ``testbed plan --manifests DIR`` writes
exactly these objects; the backend applies them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from testbed.backends.kubernetes.launch import ServerLaunch, server_launch, thawed
from testbed.backends.kubernetes.names import run_labels, worker_labels, worker_name
from testbed.backends.kubernetes.weights import datasets, run_secrets
from testbed.config.backend_settings import KubernetesSettings
from testbed.config.deployments import AnyDeployment, Placement, ServerDeployment, Toleration

DATASET_API = "datashim.io/v1alpha1"
DATASHIM_LABEL = "monitor-pods-datasets"


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


def worker(run_id: str, worker_id: str, launch: ServerLaunch, ns: str) -> list[dict[str, Any]]:
    """A worker's Deployment (one replica) and Service, around its server's ``launch``."""
    deployment = launch.deployment
    name = worker_name(worker_id)
    labels = worker_labels(run_id, worker_id)
    pod: dict[str, Any] = {
        "containers": [launch.container_spec()],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 10,
        "automountServiceAccountToken": False,
        **placement(deployment.placement),
    }
    if launch.init_containers:
        pod["initContainers"] = thawed(launch.init_containers)
    if launch.volumes:
        pod["volumes"] = thawed(launch.volumes)
    meta = {"name": name, "namespace": ns, "labels": labels}
    template_meta: dict[str, Any] = {"labels": {**labels, **launch.labels}}
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
                    for p in launch.ports()
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


def shared_objects(
    run_id: str,
    ns: str,
    own_namespace: bool,
    deployments: Sequence[AnyDeployment],
    backend: KubernetesSettings,
    reveal: Callable[[str], str],
) -> list[dict[str, Any]]:
    """The objects a run's workers share, in creation order: namespace, Secrets, Datasets."""
    servers = [d for d in deployments if isinstance(d, ServerDeployment)]
    objects: list[dict[str, Any]] = []
    if own_namespace:
        objects.append(namespace(ns, run_id, backend.datashim))
    secrets = run_secrets(servers, backend, reveal)
    objects += [secret(name, ns, run_id, data) for name, data in secrets]
    s3_secret = next((name for name, _ in secrets if name == "testbed-s3"), "testbed-s3")
    objects += [dataset(spec, ns, run_id, s3_secret) for spec in datasets(servers, backend)]
    return objects


def run_objects(
    run_id: str,
    ns: str,
    own_namespace: bool,
    workers: Mapping[str, AnyDeployment],
    backend: KubernetesSettings,
    reveal: Callable[[str], str],
) -> list[dict[str, Any]]:
    """Every object of a run, in creation order: the shared ones, then each server worker's
    (its launch resolved once, as the backend does when it provisions it)."""
    deployments = list(workers.values())
    objects = shared_objects(run_id, ns, own_namespace, deployments, backend, reveal)
    for worker_id, deployment in workers.items():
        if isinstance(deployment, ServerDeployment):
            objects += worker(run_id, worker_id, server_launch(deployment, backend), ns)
    return objects
