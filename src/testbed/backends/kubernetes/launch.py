"""A server's launch on a cluster, resolved once per worker (pure: no API calls).

:func:`server_launch` looks the deployment's adapter up once, picks the image
(:func:`~testbed.backends.kubernetes.names.server_image`), asks the adapter for its
container, and adds what the pod needs around it: the model's volumes, mounts, init
containers, environment and labels (:mod:`weights`), requests and limits (GPUs, MIG slices),
the CPU-only environment and the startup, readiness and liveness probes. The frozen
:class:`ServerLaunch` is then handed down to every step that needs the server: the
worker's manifests (:mod:`manifests`, hence ``testbed plan --manifests`` and the exported
Role), the readiness wait, the port-forwards (:mod:`worker_reach`), the endpoint the
probes speak to and the probe Job's Service URL — none of them asks the adapter again.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from kubefacts.gpu import GPU, mig_profile, mig_resource
from kubefacts.quantity import cpu_quantity, memory_quantity
from testbed.backends.endpoints import adapter_endpoint
from testbed.backends.kubernetes.names import server_image
from testbed.backends.kubernetes.weights import pod_model
from testbed.clients.endpoint import Endpoint
from testbed.config.backend_settings import KubernetesSettings
from testbed.config.deployments import Resources, ServerDeployment
from testbed.servers.adapters import ServerAdapter, adapter_for

PROBE_PERIOD_S = 1  # the kubelet probes this often until ready (s)


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


def frozen(value: Any) -> Any:
    """``value`` (JSON-like) deep read-only: mappings as proxies, lists as tuples."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: frozen(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(frozen(v) for v in value)
    return value


def thawed(value: Any) -> Any:
    """A fresh, mutable copy of a :func:`frozen` value (dicts and lists, in the same order:
    the manifests' YAML keeps the keys as written)."""
    if isinstance(value, Mapping):
        return {k: thawed(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thawed(v) for v in value]
    return value


@dataclass(frozen=True)
class ServerLaunch:
    """Everything about how one deployment's server starts in a pod and is spoken to.

    Mappings and lists are deep read-only (:func:`frozen`); the manifests take fresh copies
    (:meth:`container_spec`, :meth:`pod_pieces`)."""

    #: The deployment as resolved, its ``image`` the one chosen for the cluster.
    deployment: ServerDeployment
    adapter: ServerAdapter[Any]
    image: str
    #: The server container as applied: the adapter's spec with the pod's additions.
    container: Mapping[str, Any]
    #: The pod's own model pieces: ``volumes``, ``initContainers`` and template ``labels``.
    volumes: Sequence[Mapping[str, Any]]
    init_containers: Sequence[Mapping[str, Any]]
    labels: Mapping[str, str]
    http_port: int  # the server's HTTP port in its container
    grpc_port: int | None  # its TGIS gRPC port, if it serves one

    @property
    def title(self) -> str:
        """The deployment as messages name it: ``sim (sim)``."""
        return f"{self.deployment.name} ({self.deployment.server})"

    def container_spec(self) -> dict[str, Any]:
        """A fresh copy of :attr:`container` for a manifest."""
        spec: dict[str, Any] = thawed(self.container)
        return spec

    def ports(self) -> list[dict[str, Any]]:
        """The container's named ports (the worker's Service exposes each by its name)."""
        found: list[dict[str, Any]] = thawed(self.container["ports"])
        return found

    def http_port_name(self) -> str:
        """The name of the port the server's HTTP API listens on."""
        names = (str(p["name"]) for p in self.ports() if p["containerPort"] == self.http_port)
        return next(names, "http")

    def endpoint(self, base_url: str, grpc_target: str | None) -> Endpoint:
        """How the probes speak to this server at ``base_url`` (and ``grpc_target``)."""
        return adapter_endpoint(self.deployment, base_url, grpc_target, self.adapter)


def _kubelet_probe(path: str, port: int, failures: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": port},
        "periodSeconds": PROBE_PERIOD_S,
        "timeoutSeconds": 5,
        "failureThreshold": failures,
    }


def server_launch(deployment: ServerDeployment, backend: KubernetesSettings) -> ServerLaunch:
    """The launch of ``deployment``'s server on the cluster ``backend`` describes."""
    adapter = adapter_for(deployment.server)
    image = server_image(deployment, backend, adapter.default_image)
    resolved = deployment.model_copy(update={"image": image})
    model = pod_model(resolved, backend)
    spec = adapter.container(resolved, model.argument)
    spec["resources"] = resources(deployment.resources)
    env = list(spec.get("env") or [])
    if not deployment.resources.gpu and not any(e["name"] == "CUDA_VISIBLE_DEVICES" for e in env):
        env.append({"name": "CUDA_VISIBLE_DEVICES", "value": "-1"})  # gpu: null → no device
    spec["env"] = sorted([*env, *model.env], key=lambda e: str(e["name"]))
    path, port = adapter.readiness_path, adapter.container_port
    # Startup covers the whole startup timeout; liveness starts only after it succeeded,
    # so a slow model load is never killed as "dead".
    startup = max(1, math.ceil(deployment.startup_timeout_s / PROBE_PERIOD_S))
    spec["startupProbe"] = _kubelet_probe(path, port, startup)
    spec["readinessProbe"] = _kubelet_probe(path, port, 3)
    spec["livenessProbe"] = {**_kubelet_probe(path, port, 5), "periodSeconds": 10}
    spec["imagePullPolicy"] = "IfNotPresent"
    if model.mounts:
        spec["volumeMounts"] = model.mounts
    return ServerLaunch(
        deployment=resolved,
        adapter=adapter,
        image=image,
        container=frozen(spec),
        volumes=frozen(model.volumes),
        init_containers=frozen(model.init_containers),
        labels=frozen(model.labels),
        http_port=port,
        grpc_port=adapter.container_grpc_port(resolved.params),
    )
