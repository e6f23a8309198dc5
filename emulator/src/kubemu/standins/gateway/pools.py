"""The pools the stand-in routes to: InferencePools (endpoints, the EPP's picker) and Services.

An InferencePool's endpoints are its ready pods (``spec.selector.matchLabels``) on the host
port of ``spec.targetPorts[0]``; its picker comes from the configuration the EPP pod is given
(:mod:`.objects`), rebuilt only when that text changes, so the prefix scorer's index survives
pod churn. A Service backend is its ready pods on the target port, one chosen at random.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kubemu.standins.gateway import objects as ob
from kubemu.standins.gateway.epp import (
    DEFAULT_CONFIG,
    Endpoint,
    EppConfigError,
    Picker,
    parse_config,
)
from kubemu.standins.gateway.scrape import DEFAULT_INTERVAL_S, interval_from_args

if TYPE_CHECKING:
    from kubemu.storage.store import Store

#: ``ports(namespace, pod)``: the pod's container port → host port map (the kubelet's).
Ports = Callable[[str, str], Mapping[int, int]]


class PoolBackend:
    """An InferencePool as the proxy sees it: endpoints, picker, what is wrong with it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.endpoints: dict[str, Endpoint] = {}
        self.picker: Picker | None = None
        self.config_text: str | None = None
        self.error = ""
        self.interval = 0.05
        self.scraper: asyncio.Task[None] | None = None

    def endpoint_list(self) -> list[Endpoint]:
        return list(self.endpoints.values())

    def refresh_interval(self) -> float:
        return self.interval

    def choose(self, prompt: str) -> tuple[str | None, str]:
        if self.error or self.picker is None:
            return None, f"InferencePool {self.name}: {self.error or 'no endpoint picker yet'}"
        chosen = self.picker.pick(prompt, list(self.endpoints.values()))
        if chosen is None:
            return None, f"InferencePool {self.name} has no ready endpoint"
        return chosen.address, ""


class ServiceBackend:
    def __init__(self, name: str, addresses: list[str]) -> None:
        self.name, self.addresses = name, addresses

    def choose(self, prompt: str) -> tuple[str | None, str]:
        del prompt
        if not self.addresses:
            return None, f"Service {self.name} has no ready endpoint"
        return random.choice(self.addresses), ""


def sync_endpoints(store: Store, ports: Ports, pool: Any, backend: PoolBackend) -> None:
    """The pool's endpoints: its ready pods on its first target port (metrics kept)."""
    ns = str(pool["metadata"]["namespace"])
    spec = pool.get("spec") or {}
    selector = (spec.get("selector") or {}).get("matchLabels") or {}
    target_ports = spec.get("targetPorts") or [{}]
    target = int(target_ports[0].get("number") or 0)
    fresh: dict[str, Endpoint] = {}
    for pod in store.list("pods", ns)[0]:
        if (
            not selector
            or not ob.selects(selector, pod["metadata"].get("labels"))
            or not ob.ready(pod)
        ):
            continue
        name = str(pod["metadata"]["name"])
        host = ports(ns, name).get(target)
        if host is None:
            continue
        old = backend.endpoints.get(name)
        address = f"127.0.0.1:{host}"
        if old is not None and old.address == address:
            fresh[name] = old
        else:
            fresh[name] = Endpoint(name, address, dict(pod["metadata"].get("labels") or {}))
    backend.endpoints = fresh


def sync_picker(store: Store, pool: Any, backend: PoolBackend) -> None:
    """The pool's picker, rebuilt only when its EPP configuration changed (indexes kept)."""
    try:
        text, interval = epp_config(store, pool)
    except EppConfigError as exc:
        backend.error, backend.picker, backend.config_text = str(exc), None, None
        return
    backend.interval = interval
    if text != backend.config_text or backend.picker is None:
        try:
            backend.picker = parse_config(text)
            backend.error = ""
        except EppConfigError as exc:
            backend.picker, backend.error = None, f"EPP configuration: {exc}"
        backend.config_text = text


def epp_config(store: Store, pool: Any) -> tuple[str, float]:
    """The EPP configuration text and metrics interval (see ``objects``)."""
    ns = str(pool["metadata"]["namespace"])
    ref = (pool.get("spec") or {}).get("endpointPickerRef") or {}
    if not ref.get("name"):
        return DEFAULT_CONFIG, DEFAULT_INTERVAL_S
    svc = store.try_get("services", ns, str(ref["name"]))
    if svc is None:
        raise EppConfigError(f"endpointPickerRef names Service {ref['name']}, which does not exist")
    selector = (svc.get("spec") or {}).get("selector") or {}
    pods = [
        p for p in store.list("pods", ns)[0]
        if selector and ob.selects(selector, p["metadata"].get("labels"))
        and not p["metadata"].get("deletionTimestamp")
    ]  # fmt: skip
    if not pods:
        raise EppConfigError(f"no EPP pod is selected by Service {ref['name']} yet")
    args = ob.epp_args(pods[0])
    interval = interval_from_args(args)
    text = ob.flag(args, "--config-text")
    if text is not None:
        return text, interval
    path = ob.flag(args, "--config-file")
    if path is None:
        return DEFAULT_CONFIG, interval
    source = ob.config_file_source(pods[0], path)
    if source is None:
        raise EppConfigError(f"--config-file {path} is not in a ConfigMap mounted in the EPP pod")
    cm = store.try_get("configmaps", ns, source[0])
    data = (cm or {}).get("data") or {}
    if source[1] not in data:
        raise EppConfigError(f"ConfigMap {source[0]} has no key {source[1]} (--config-file {path})")
    return str(data[source[1]]), interval
