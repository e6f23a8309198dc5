"""The objects of ``backend.probes: cluster`` (pure functions): the campaign as a
ConfigMap of the run, the values of its probes' ``${env:}`` names as a Secret of the run, and
one Job per treatment attempt.

The Job runs testbed's image: ``testbed worker /campaign/campaign.yaml --treatment ID
--endpoint DEPLOYMENT=URL … --stream``. Each URL is built from the standard service
environment variables the kubelet injects for the Services of the pod's namespace
(``<SERVICE>_SERVICE_HOST`` and ``<SERVICE>_SERVICE_PORT_<PORT NAME>``), written as
``$(VAR)`` references that the kubelet expands in ``args`` — so the probe reaches the
worker's Service without DNS, on any cluster (the Services exist before the Job, as these
variables require). ``backoffLimit: 0``: a killed or failed probe pod is that treatment's
ERROR; testbed's own retries and ``--resume`` decide what runs again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from testbed.backends.kubernetes.launch import server_launch
from testbed.backends.kubernetes.names import (
    dns_name,
    label_value,
    run_labels,
    testbed_image,
    worker_name,
)
from testbed.config.backend_settings import KubernetesSettings
from testbed.config.deployments import AnyDeployment, ExternalDeployment
from testbed.config.stacks import StackDeployment

PROBE = "testbed.io/probe"
CAMPAIGN_MOUNT = "/campaign"
RESULTS_MOUNT = "/results"
CONTAINER = "probe"


def campaign_configmap_name(run_id: str) -> str:
    return dns_name(f"campaign-{run_id}")


def env_secret_name(run_id: str) -> str:
    return dns_name(f"probe-env-{run_id}")


def env_secret(run_id: str, namespace: str, values: Mapping[str, str]) -> dict[str, Any]:
    """The values of the ``${env:}`` names the probes resolve (header secrets): the Job's
    container has them as variables of the same names, never in its spec or the ConfigMap."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": env_secret_name(run_id),
            "namespace": namespace,
            "labels": run_labels(run_id),
        },
        "stringData": dict(values),
    }


def job_name(run_id: str, treatment_dirname: str, attempt: int) -> str:
    return dns_name(f"probe-{run_id}-{treatment_dirname}-a{attempt}")


def probe_labels(run_id: str, treatment_id: str, attempt: int) -> dict[str, str]:
    return {**run_labels(run_id), PROBE: label_value(f"{treatment_id}-a{attempt}")}


def probe_selector(run_id: str, treatment_id: str, attempt: int) -> str:
    return ",".join(f"{k}={v}" for k, v in probe_labels(run_id, treatment_id, attempt).items())


def service_env_name(service: str, suffix: str) -> str:
    """The kubelet's variable name for a Service: upper case, dashes as underscores."""
    return f"{service.upper().replace('-', '_')}_{suffix}"


def service_url(worker_id: str, deployment: AnyDeployment, backend: KubernetesSettings) -> str:
    """The worker's Service as a URL of ``$(VAR)`` references the kubelet expands (a stack's
    URL is known once it is ready: the run passes it; a plan shows where it comes from; an
    external deployment's is its own)."""
    if isinstance(deployment, ExternalDeployment):
        return deployment.url
    if isinstance(deployment, StackDeployment):
        endpoint = deployment.endpoint.model_dump(mode="json", exclude={"protocols"})
        what = " ".join(f"{k}={v}" for k, v in endpoint.items())
        return f"<the stack's endpoint once ready: {what}>"
    service = worker_name(worker_id)
    port = server_launch(deployment, backend).http_port_name()
    host = service_env_name(service, "SERVICE_HOST")
    number = service_env_name(service, f"SERVICE_PORT_{port.upper().replace('-', '_')}")
    return f"http://$({host}):$({number})"


def configmap(run_id: str, namespace: str, data: Mapping[str, str]) -> dict[str, Any]:
    """The resolved campaign and its case files (the Job's volume lays them out)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": campaign_configmap_name(run_id),
            "namespace": namespace,
            "labels": run_labels(run_id),
        },
        "data": dict(data),
    }


def probe_job(
    run_id: str,
    namespace: str,
    treatment: Mapping[str, Any],
    attempt: int,
    workers: Mapping[str, AnyDeployment],
    backend: KubernetesSettings,
    items: list[dict[str, str]],
    urls: Mapping[str, str] | None = None,
    env: Sequence[str] = (),
) -> dict[str, Any]:
    """The Job running ``treatment`` (``id``, ``dirname``) against ``workers`` (worker id →
    deployment config), with the campaign ConfigMap's ``items`` mounted at /campaign;
    ``urls`` (worker id → URL) overrides a worker's Service URL (a stack's endpoint);
    ``env``: the variables it takes from the run's :func:`env_secret`."""
    labels = probe_labels(run_id, str(treatment["id"]), attempt)
    args = [
        "worker",
        f"{CAMPAIGN_MOUNT}/campaign.yaml",
        "--treatment",
        str(treatment["id"]),
        "--out",
        f"{RESULTS_MOUNT}/run",
        "--stream",
    ]
    for worker_id, deployment in workers.items():
        url = (urls or {}).get(worker_id) or service_url(worker_id, deployment, backend)
        args += ["--endpoint", f"{deployment.name}={url}"]
    container = {
        "name": CONTAINER,
        "image": testbed_image(backend),
        "imagePullPolicy": "IfNotPresent",
        "command": ["testbed"],
        "args": args,
        "env": [
            {
                "name": name,
                "valueFrom": {"secretKeyRef": {"name": env_secret_name(run_id), "key": name}},
            }
            for name in env
        ],
        "volumeMounts": [
            {"name": "campaign", "mountPath": CAMPAIGN_MOUNT, "readOnly": True},
            {"name": "results", "mountPath": RESULTS_MOUNT},
        ],
        "resources": {
            "requests": {"cpu": "1", "memory": "1Gi"},
            "limits": {"cpu": "2", "memory": "4Gi"},
        },
    }
    volumes = [
        {
            "name": "campaign",
            "configMap": {
                "name": campaign_configmap_name(run_id),
                "items": [dict(i) for i in items],
            },
        },
        {"name": "results", "emptyDir": {}},
    ]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(run_id, str(treatment["dirname"]), attempt),
            "namespace": namespace,
            "labels": labels,
        },
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "enableServiceLinks": True,  # the $(…_SERVICE_HOST) URLs need them
                    "automountServiceAccountToken": False,
                    "terminationGracePeriodSeconds": 10,
                    "containers": [container],
                    "volumes": volumes,
                },
            },
        },
    }
