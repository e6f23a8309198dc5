"""Where a stack serves: its endpoint resolved to a URL here and a URL inside the cluster.

- ``{service: NAME, port: P}``: the Service (of the stack, or made by its operators).
- ``{gateway: NAME, port: P}``: the Gateway's ``status.addresses[0]``; inside the cluster
  ``http://ADDRESS:P``. From outside, the Service that fronts the Gateway: the one labelled
  ``gateway.networking.k8s.io/gateway-name: NAME`` (what in-cluster Gateway implementations
  put on the Service they make, GEP-1762), else the one whose cluster IP or DNS name is the
  address.
- ``{url_from: status.url, kind: K, name: N}``: the URL in that field. A host of the form
  ``SERVICE.NAMESPACE.svc[.cluster.local]`` is that Service; any other host is used as it is.

Inside the cluster (``backend.access: service``) probes use the Service's DNS name. From
this machine, a Service is reached like ``kubectl port-forward service/NAME`` — port-forwards
on the container port its ``targetPort`` names — except that the connections go to the Ready
pods its selector picks in turn (as the Service would spread them), not all to one. The
metrics Service is read pod by pod (a port-forward each, or the pod's IP in the cluster):
its counters are per process, and the sampler sums them. The
in-cluster URL handed to probe Jobs (``backend.probes: cluster``) uses the kubelet's
``NAME_SERVICE_HOST``/``_PORT`` variables when the Service is in the run's namespace.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from testbed.backends.kubernetes.stack_render import StackObject
from testbed.clients.kube import Kube, PortForward
from testbed.clients.kube.rest import KindInfo
from testbed.config.stacks import (
    GatewayEndpoint,
    ServiceEndpoint,
    StackDeployment,
    StackEndpoint,
    StatusEndpoint,
)
from testbed.core.errors import ServerStartError

GATEWAY_LABEL = "gateway.networking.k8s.io/gateway-name"
_SERVICE_HOST = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.([a-z0-9-]+)\.svc(\.cluster\.local)?$"
)


@dataclass(frozen=True)
class Target:
    """A resolved endpoint: a Service and its port, or a URL usable as it is."""

    cluster_url: str  # from a pod of the run's namespace
    service: Mapping[str, Any] | None = None
    port: int | str = 80
    path: str = ""  # a base path after the host (a status URL's)
    url: str | None = None  # used as it is when there is no Service


@dataclass(frozen=True)
class Where:
    base_url: str  # where probes running here send requests
    cluster_url: str  # the same server for a probe Job of the run
    metrics_urls: tuple[str, ...] = ()  # one per pod of the metrics Service


def _placed(
    placed: Sequence[tuple[StackObject, KindInfo]], kind: str, name: str
) -> tuple[StackObject, KindInfo] | None:
    return next(((o, i) for o, i in placed if o.kind == kind and o.name == name), None)


def _must(
    placed: Sequence[tuple[StackObject, KindInfo]], kind: str, name: str
) -> tuple[StackObject, KindInfo]:
    found = _placed(placed, kind, name)
    if found is None:  # validation refuses this before a run; a resumed edit may not
        raise ServerStartError(f"the endpoint names {kind}/{name}, which the stack lacks")
    return found


def _namespace_of(item: StackObject | None, default: str) -> str:
    return str(((item.obj.get("metadata") or {}).get("namespace") if item else None) or default)


def env_url(service: Mapping[str, Any], port: int | str, namespace: str, path: str = "") -> str:
    """The Service as a URL: ``$(VAR)`` references when it is in ``namespace`` (the probe
    Job's), else its DNS name."""
    meta = service["metadata"]
    ports = (service.get("spec") or {}).get("ports") or []
    entry = _service_port(service, port)
    number = entry.get("port", port)
    if meta.get("namespace") != namespace or not ports:
        return f"http://{meta['name']}.{meta.get('namespace')}.svc:{number}{path}"
    var = str(meta["name"]).upper().replace("-", "_")
    if entry.get("name"):
        suffix = f"SERVICE_PORT_{str(entry['name']).upper().replace('-', '_')}"
    elif entry is ports[0]:
        suffix = "SERVICE_PORT"
    else:
        return f"http://$({var}_SERVICE_HOST):{number}{path}"
    return f"http://$({var}_SERVICE_HOST):$({var}_{suffix}){path}"


def _service_port(service: Mapping[str, Any], port: int | str) -> dict[str, Any]:
    ports = (service.get("spec") or {}).get("ports") or []
    for entry in ports:
        if port in (entry.get("port"), entry.get("name")) or str(port) == str(entry.get("port")):
            return dict(entry)
    known = ", ".join(f"{p.get('name') or ''}:{p.get('port')}" for p in ports) or "none"
    raise ServerStartError(
        f"Service {service['metadata']['name']} has no port {port} (its ports: {known})"
    )


def _service(kube: Kube, name: str, namespace: str, why: str) -> dict[str, Any]:
    found = kube.get("Service", name, namespace)
    if found is None:
        raise ServerStartError(
            f"{why} names Service {name}, which does not exist in namespace {namespace}"
            " after the stack was ready — check the name (kubectl get services -n"
            f" {namespace})"
        )
    return found


def resolve(
    kube: Kube,
    namespace: str,
    endpoint: StackEndpoint,
    placed: Sequence[tuple[StackObject, KindInfo]],
) -> Target:
    """The endpoint's target (blocking: reads the cluster)."""
    if isinstance(endpoint, ServiceEndpoint):
        item = _placed(placed, "Service", endpoint.service)
        ns = _namespace_of(item[0] if item else None, namespace)
        svc = _service(kube, endpoint.service, ns, "endpoint")
        return Target(env_url(svc, endpoint.port, namespace), svc, endpoint.port)
    if isinstance(endpoint, GatewayEndpoint):
        return _gateway(kube, namespace, endpoint, placed)
    return _status_url(kube, namespace, endpoint, placed)


def _read(kube: Kube, item: StackObject, info: KindInfo, namespace: str) -> dict[str, Any]:
    ns = _namespace_of(item, namespace) if info.namespaced else None
    path = f"{info.collection(ns)}/{item.name}"
    return kube.call("GET", path, f"get {item.describe()}")


def _gateway(
    kube: Kube,
    namespace: str,
    endpoint: GatewayEndpoint,
    placed: Sequence[tuple[StackObject, KindInfo]],
) -> Target:
    name, port = endpoint.gateway, endpoint.port
    item, info = _must(placed, "Gateway", name)
    gateway = _read(kube, item, info, namespace)
    ns = _namespace_of(item, namespace)
    addresses = [a for a in (gateway.get("status") or {}).get("addresses") or [] if a.get("value")]
    if not addresses:
        raise ServerStartError(
            f"Gateway {name} has no status.addresses — wait for it with ready:"
            f" [{{kind: Gateway, name: {name}, condition: Programmed}}]"
        )
    address = str(addresses[0]["value"])
    services, _ = kube.list_objects("Service", ns, f"{GATEWAY_LABEL}={name}")
    if not services:
        every, _ = kube.list_objects("Service", ns)
        services = [s for s in every if _is_address_of(s, address, ns)]
    if not services:
        return Target(f"http://{address}:{port}", url=f"http://{address}:{port}")
    svc = services[0]
    return Target(env_url(svc, port, namespace), svc, port)


def _is_address_of(service: Mapping[str, Any], address: str, namespace: str) -> bool:
    name = service["metadata"]["name"]
    ip = (service.get("spec") or {}).get("clusterIP")
    return address == ip or address.startswith(f"{name}.{namespace}.svc")


def _status_url(
    kube: Kube,
    namespace: str,
    endpoint: StatusEndpoint,
    placed: Sequence[tuple[StackObject, KindInfo]],
) -> Target:
    item, info = _must(placed, endpoint.kind, endpoint.name)
    value: Any = _read(kube, item, info, namespace)
    for part in endpoint.url_from.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    if not isinstance(value, str) or not value.startswith(("http://", "https://")):
        raise ServerStartError(
            f"{item.describe()} has no URL at {endpoint.url_from} (found {value!r}) after"
            " its ready conditions held — wait for the condition that sets it"
        )
    url = urlsplit(value)
    match = _SERVICE_HOST.match(url.hostname or "")
    if match is None:
        return Target(value, url=value)
    port = url.port or (443 if url.scheme == "https" else 80)
    svc = _service(kube, match.group(1), match.group(3), f"{item.describe()}'s {url.hostname}")
    path = url.path.rstrip("/")
    return Target(env_url(svc, port, namespace, path), svc, port, path)


def _ready_pods(kube: Kube, service: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Ready pods a Service selects (at least one, else ServerStartError)."""
    meta, spec = service["metadata"], service.get("spec") or {}
    selector = ",".join(f"{k}={v}" for k, v in (spec.get("selector") or {}).items())
    if not selector:
        raise ServerStartError(f"Service {meta['name']} has no selector: no pod to forward to")
    pods, _ = kube.list_objects("Pod", meta["namespace"], selector)
    ready = [
        pod
        for pod in pods
        if not pod["metadata"].get("deletionTimestamp")
        and any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (pod.get("status") or {}).get("conditions") or []
        )
    ]
    if ready:
        return sorted(ready, key=lambda p: str(p["metadata"]["name"]))
    raise ServerStartError(
        f"Service {meta['name']} has no Ready pod behind it (selector {selector}, {len(pods)}"
        " pods) — add a ready condition on the workload that serves it"
    )


def container_port(pod: Mapping[str, Any], target: int | str) -> int:
    """The pod's port a Service's ``targetPort`` names (a number, or a container port name)."""
    if isinstance(target, int) or str(target).isdigit():
        return int(target)
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("name") == target:
                return int(port["containerPort"])
    raise ServerStartError(f"pod {pod['metadata']['name']} has no container port named {target}")


@contextlib.asynccontextmanager
async def _open(
    stack: contextlib.AsyncExitStack,
    kube: Kube,
    target: Target,
    in_cluster: bool,
    died: asyncio.Future[str],
) -> AsyncIterator[str]:
    """The target's base URL: connections spread over all its Ready pods."""
    if target.service is None:
        yield str(target.url)
        return
    entry = _service_port(target.service, target.port)
    meta = target.service["metadata"]
    if in_cluster:
        yield f"http://{meta['name']}.{meta['namespace']}.svc:{entry['port']}{target.path}"
        return
    pods = await asyncio.to_thread(_ready_pods, kube, target.service)
    port = container_port(pods[0], entry.get("targetPort") or entry["port"])
    names = [str(pod["metadata"]["name"]) for pod in pods]
    local = await stack.enter_async_context(
        PortForward(kube.api, meta["namespace"], names, port, _refused(names, port, died))
    )
    yield f"http://127.0.0.1:{local}{target.path}"


async def _each_pod(
    stack: contextlib.AsyncExitStack,
    kube: Kube,
    service: Mapping[str, Any],
    port: int | str,
    in_cluster: bool,
    died: asyncio.Future[str],
) -> tuple[str, ...]:
    """A base URL per Ready pod of ``service`` (metrics: a counter is one process's, so
    every pod is read on its own — through the Service, each scrape would hit any one)."""
    entry = _service_port(service, port)
    pods = await asyncio.to_thread(_ready_pods, kube, service)
    urls = []
    for pod in pods:
        number = container_port(pod, entry.get("targetPort") or entry["port"])
        address = (pod.get("status") or {}).get("podIP")
        if in_cluster and address:
            urls.append(f"http://{address}:{number}")
            continue
        name = str(pod["metadata"]["name"])
        namespace = service["metadata"]["namespace"]
        refused = _refused([name], number, died)
        forward = PortForward(kube.api, namespace, [name], number, refused)
        urls.append(f"http://127.0.0.1:{await stack.enter_async_context(forward)}")
    return tuple(urls)


def _refused(pods: list[str], port: int, died: asyncio.Future[str]) -> Callable[[str], None]:
    def note(message: str) -> None:
        if not died.done():
            died.set_result(f"a pod of {', '.join(pods)} does not answer on port {port}: {message}")

    return note


@contextlib.asynccontextmanager
async def reach(
    kube: Kube,
    namespace: str,
    deployment: StackDeployment,
    placed: Sequence[tuple[StackObject, KindInfo]],
    in_cluster: bool,
    died: asyncio.Future[str],
) -> AsyncIterator[Where]:
    """The stack's URLs while the block runs (port-forwards from here when needed)."""
    target = await asyncio.to_thread(resolve, kube, namespace, deployment.endpoint, placed)
    metrics = deployment.metrics
    async with contextlib.AsyncExitStack() as stack:
        base = await stack.enter_async_context(_open(stack, kube, target, in_cluster, died))
        metrics_urls: tuple[str, ...] = ()
        if metrics:
            item = _placed(placed, "Service", metrics.service)
            ns = _namespace_of(item[0] if item else None, namespace)
            svc = await asyncio.to_thread(_service, kube, metrics.service, ns, "metrics")
            metrics_urls = await _each_pod(stack, kube, svc, metrics.port, in_cluster, died)
        yield Where(base, target.cluster_url, metrics_urls)
