"""Service environment variables, as the kubelet injects them into every container.

For each Service of the pod's namespace (``enableServiceLinks``, the default) the real
kubelet sets ``<NAME>_SERVICE_HOST`` (the cluster IP), ``<NAME>_SERVICE_PORT`` (the first
port), ``<NAME>_SERVICE_PORT_<PORT NAME>`` per named port, and the Docker-link variables
``<NAME>_PORT``, ``<NAME>_PORT_<P>_<PROTO>`` (+ ``_PROTO``, ``_PORT``, ``_ADDR``); NAME is
the Service's name in upper case with dashes as underscores. Headless Services get none.

The emulator has no cluster IPs that route anywhere: a Service's variables point at
``127.0.0.1`` and the host port of a Ready pod that backs it (its selector; the
``targetPort``, by number or by name), which is where that pod's process listens. A Service
without a Ready backing pod has no variables (its cluster IP would lead nowhere here).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

#: ``host_ports(namespace, pod name)``: the pod's container port → host port map.
HostPorts = Callable[[str, str], Mapping[int, int]]


def env_name(service: str) -> str:
    return service.upper().replace("-", "_")


def service_env(
    services: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]], host_ports: HostPorts
) -> dict[str, str]:
    """The variables of ``services`` (one namespace), backed by ready ``pods`` of it."""
    env: dict[str, str] = {}
    for service in services:
        spec = service.get("spec") or {}
        if spec.get("clusterIP") == "None" or not spec.get("selector"):
            continue
        backing = _ready_backing_pod(spec["selector"], pods)
        if backing is None:
            continue
        mapped: list[tuple[Mapping[str, Any], int]] = []
        for port in spec.get("ports") or []:
            host_port = _host_port(port, backing, host_ports)
            if host_port:
                mapped.append((port, host_port))
        if not mapped:
            continue
        env.update(_variables(env_name(str(service["metadata"]["name"])), mapped))
    return env


def _variables(name: str, ports: list[tuple[Mapping[str, Any], int]]) -> dict[str, str]:
    host = "127.0.0.1"
    first_port, first_host = ports[0]
    proto = str(first_port.get("protocol") or "TCP")
    env = {
        f"{name}_SERVICE_HOST": host,
        f"{name}_SERVICE_PORT": str(first_host),
        f"{name}_PORT": f"{proto.lower()}://{host}:{first_host}",
    }
    for port, host_port in ports:
        proto = str(port.get("protocol") or "TCP")
        if port.get("name"):
            env[f"{name}_SERVICE_PORT_{env_name(str(port['name']))}"] = str(host_port)
        link = f"{name}_PORT_{port['port']}_{proto}"
        env[link] = f"{proto.lower()}://{host}:{host_port}"
        env[f"{link}_PROTO"] = proto.lower()
        env[f"{link}_PORT"] = str(host_port)
        env[f"{link}_ADDR"] = host
    return env


def _ready_backing_pod(
    selector: Mapping[str, str], pods: Sequence[Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if any(labels.get(k) != v for k, v in selector.items()):
            continue
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue
        conditions = (pod.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
            return pod
    return None


def _host_port(
    port: Mapping[str, Any], pod: Mapping[str, Any], host_ports: HostPorts
) -> int | None:
    target = port.get("targetPort", port.get("port"))
    number: int | None = None
    if isinstance(target, int) or str(target).isdigit():
        number = int(target)
    else:
        for container in (pod.get("spec") or {}).get("containers") or []:
            for declared in container.get("ports") or []:
                if declared.get("name") == target:
                    number = int(declared["containerPort"])
    if number is None:
        return None
    meta = pod["metadata"]
    return host_ports(str(meta.get("namespace")), str(meta["name"])).get(number)
