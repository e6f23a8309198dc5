"""The stand-in gateway's control plane (``testbed cluster emulate --gateway-stand-in``).

It plays a Gateway API implementation with GAIE's inference extension, for GatewayClasses whose
``spec.controllerName`` is ``testbed.io/gateway-stand-in``:

- a GatewayClass gets ``Accepted``; each Gateway of such a class gets a data-plane pod and
  Service (:mod:`.objects`), the proxy (:mod:`.proxy`) listening on the pod's host ports, and
  then ``Accepted``/``Programmed``, ``status.addresses`` (the Service's cluster IP) and its
  listeners' status;
- an HTTPRoute attached to such a Gateway gets ``Accepted``/``ResolvedRefs`` per parent; its
  rules route to Services or InferencePools (``inference.networking.k8s.io``);
- an InferencePool's endpoints are its ready pods (``spec.selector.matchLabels``) on
  ``spec.targetPorts[0]``; its picker is built from the EPP configuration the EPP pod is given
  (:func:`.objects.epp_args`), and the pods' metrics are scraped as the EPP does
  (:mod:`.scrape`). A configuration the stand-in cannot play is ``ResolvedRefs=False`` on the
  pool with the reason, and requests routed to it get 503 naming it.

The Gateway API and GAIE CRDs are not served by the emulator itself: a stack applies the
published ones. The controller follows changes of every kind involved (after its CRD appears)
and reconciles everything at once — a stack has a handful of these objects.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import aiohttp

from kubemu.standins.gateway import objects as ob
from kubemu.standins.gateway.pools import (
    PoolBackend,
    Ports,
    ServiceBackend,
    sync_endpoints,
    sync_picker,
)
from kubemu.standins.gateway.proxy import Backend, GatewayProxy, Rule
from kubemu.standins.gateway.scrape import scrape_forever
from kubemu.storage.errors import ApiError

if TYPE_CHECKING:
    from kubemu.storage.store import Store

_log = logging.getLogger(__name__)
_WATCHED = (*ob.KEYS.values(), "pods", "services", "configmaps")


class GatewayStandIn:
    """Reconciles every object involved on each change (see the module docstring)."""

    def __init__(self, store: Store, ports: Ports) -> None:
        self.store = store
        self.ports = ports
        self._wake = asyncio.Event()
        self._proxies: dict[tuple[str, str], GatewayProxy] = {}
        self._rules: dict[tuple[str, str], list[Rule]] = {}
        self._pools: dict[tuple[str, str], PoolBackend] = {}
        self._session: aiohttp.ClientSession | None = None
        self._group: asyncio.TaskGroup | None = None

    async def run(self) -> None:
        for key in _WATCHED:
            self.store.subscribe(key, lambda _event: self._wake.set())
        self._wake.set()
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=5)
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(
            timeout=timeout, connector=connector, auto_decompress=False
        ) as session:
            self._session = session
            try:
                async with asyncio.TaskGroup() as group:
                    self._group = group
                    while True:
                        await self._wake.wait()
                        self._wake.clear()
                        try:
                            await self._reconcile()
                        except (ApiError, KeyError, TypeError, ValueError, OSError) as exc:
                            # A malformed object or a write that lost a race: retried soon,
                            # never the end of the control plane.
                            _log.warning("gateway stand-in: %s (retried)", exc)
                            asyncio.get_running_loop().call_later(0.5, self._wake.set)
                        await asyncio.sleep(0.02)  # let a burst of writes settle
            finally:
                for proxy in self._proxies.values():
                    await proxy.close()
                for pool in self._pools.values():
                    if pool.scraper is not None:
                        pool.scraper.cancel()

    # -- one pass ---------------------------------------------------------------------------
    async def _reconcile(self) -> None:
        served = set(self.store.storage_keys())
        classes = self._classes() if ob.KEYS["GatewayClass"] in served else set()
        gateways = []
        if ob.KEYS["Gateway"] in served:
            items, _ = self.store.list(ob.KEYS["Gateway"])
            gateways = [
                g for g in items if (g.get("spec") or {}).get("gatewayClassName") in classes
            ]
        self._sync_pools(served)
        live = set()
        for gateway in gateways:
            meta = gateway["metadata"]
            key = (str(meta["namespace"]), str(meta["name"]))
            if meta.get("deletionTimestamp"):
                continue
            live.add(key)
            try:
                await self._gateway(gateway, key, served)
            except ApiError as exc:
                _log.debug("gateway stand-in: %s/%s: %s (retried)", *key, exc)
                asyncio.get_running_loop().call_later(0.5, self._wake.set)
        for key in [k for k in self._proxies if k not in live]:
            await self._proxies.pop(key).close()
            self._rules.pop(key, None)

    def _classes(self) -> set[str]:
        key = ob.KEYS["GatewayClass"]
        if self.store.try_get(key, None, ob.GATEWAY_CLASS) is None:
            self.store.create(key, ob.gateway_class())
        ours = set()
        for gc in self.store.list(key)[0]:
            if (gc.get("spec") or {}).get("controllerName") != ob.CONTROLLER_NAME:
                continue
            name = gc["metadata"]["name"]
            ours.add(name)
            conds = (gc.get("status") or {}).get("conditions") or []
            wanted = [ob.condition("Accepted", True, "Accepted", "", ob.generation(gc), conds)]
            self._write_status(
                key, None, name, gc, {**(gc.get("status") or {}), "conditions": wanted}
            )
        return ours

    def _write_status(
        self, key: str, ns: str | None, name: str, obj: Any, status: dict[str, Any]
    ) -> None:
        if obj.get("status") == status:
            return

        def change(draft: dict[str, Any]) -> None:
            draft["status"] = status

        try:
            self.store.mutate(key, ns, name, change, subresource="status")
        except ApiError as exc:
            if exc.code != 404:
                raise
            self.store.mutate(key, ns, name, change)  # a CRD without a status subresource

    # -- pools --------------------------------------------------------------------------------
    def _sync_pools(self, served: set[str]) -> None:
        key = ob.KEYS["InferencePool"]
        items = self.store.list(key)[0] if key in served else []
        seen = set()
        for pool in items:
            meta = pool["metadata"]
            ident = (str(meta["namespace"]), str(meta["name"]))
            seen.add(ident)
            backend = self._pools.get(ident)
            if backend is None:
                backend = self._pools[ident] = PoolBackend(ident[1])
            sync_endpoints(self.store, self.ports, pool, backend)
            sync_picker(self.store, pool, backend)
            if backend.scraper is None and self._group is not None and self._session is not None:
                backend.scraper = self._group.create_task(
                    scrape_forever(self._session, backend.endpoint_list, backend.refresh_interval)
                )
        for ident in [k for k in self._pools if k not in seen]:
            gone = self._pools.pop(ident)
            if gone.scraper is not None:
                gone.scraper.cancel()

    # -- gateways and routes ------------------------------------------------------------------
    async def _gateway(self, gateway: Any, key: tuple[str, str], served: set[str]) -> None:
        ns, name = key
        plane = ob.data_plane_name(gateway)
        if self.store.try_get("services", ns, plane) is None:
            self.store.create("services", ob.data_plane_service(gateway), ns)
        if self.store.try_get("pods", ns, plane) is None:
            self.store.create("pods", ob.data_plane_pod(gateway), ns)
        routes = self._routes(ns, name, served)
        self._rules[key] = [rule for _, rules in routes for rule in rules]
        proxy = self._proxies.get(key)
        if proxy is None and self._session is not None:
            rules = functools.partial(self._rules_of, key)
            proxy = self._proxies[key] = GatewayProxy(f"{ns}/{name}", self._session, rules)
        host_ports = self.ports(ns, plane)
        wanted = {p: host_ports[p] for p in ob.listener_ports(gateway) if p in host_ports}
        programmed = bool(wanted) and len(wanted) == len(ob.listener_ports(gateway))
        if programmed and proxy is not None:
            await proxy.bind(wanted)
        svc = self.store.try_get("services", ns, plane) or {}
        self._gateway_status(
            gateway, programmed, str((svc.get("spec") or {}).get("clusterIP") or ""), len(routes)
        )

    def _rules_of(self, key: tuple[str, str]) -> list[Rule]:
        return self._rules.get(key, [])

    def _routes(self, ns: str, gateway: str, served: set[str]) -> list[tuple[Any, list[Rule]]]:
        key = ob.KEYS["HTTPRoute"]
        if key not in served:
            return []
        out = []
        for route in self.store.list(key, ns)[0]:
            if gateway not in ob.parent_names(route, ns) or route["metadata"].get(
                "deletionTimestamp"
            ):
                continue
            rules, problems, refused = [], [], []
            for rule in (route.get("spec") or {}).get("rules") or []:
                refused += ob.unsupported(rule)
                try:
                    timeout_s = ob.duration_s(
                        str((rule.get("timeouts") or {}).get("request", "0s"))
                    )
                except ValueError as exc:
                    refused.append(f"timeouts.request: {exc}")
                    timeout_s = None
                backends = []
                for ref in rule.get("backendRefs") or []:
                    backend, problem = self._backend(ns, ref)
                    if backend is not None:
                        backends.append((float(ref.get("weight", 1)), backend))
                    if problem:
                        problems.append(problem)
                for match in rule.get("matches") or [
                    {"path": {"type": "PathPrefix", "value": "/"}}
                ]:
                    path = match.get("path") or {"type": "PathPrefix", "value": "/"}
                    rules.append(
                        Rule(
                            str(path.get("type", "PathPrefix")),
                            str(path.get("value", "/")),
                            tuple(backends),
                            timeout_s,
                        )
                    )
            self._route_status(route, ns, gateway, problems, refused)
            out.append((route, [] if refused else rules))  # a refused route routes nothing
        return out

    def _backend(self, ns: str, ref: Mapping[str, Any]) -> tuple[Backend | None, str]:
        kind, group = ref.get("kind", "Service"), ref.get("group", "")
        name = str(ref.get("name"))
        if kind == "InferencePool" and group == ob.POOL_GROUP:
            pool = self._pools.get((ns, name))
            return (
                (pool, "") if pool is not None else (None, f"InferencePool {name} does not exist")
            )
        if kind == "Service" and group in ("", "core"):
            svc = self.store.try_get("services", ns, name)
            if svc is None:
                return None, f"Service {name} does not exist"
            port = int(ref.get("port") or 0)
            target = next(
                (
                    p.get("targetPort", p.get("port"))
                    for p in (svc.get("spec") or {}).get("ports") or []
                    if p.get("port") == port
                ),
                port,
            )
            selector = (svc.get("spec") or {}).get("selector") or {}
            addresses = [
                f"127.0.0.1:{self.ports(ns, p['metadata']['name'])[int(target)]}"
                for p in self.store.list("pods", ns)[0]
                if selector and ob.selects(selector, p["metadata"].get("labels")) and ob.ready(p)
                and int(target) in self.ports(ns, p["metadata"]["name"])
            ]  # fmt: skip
            return ServiceBackend(name, addresses), ""
        return None, f"backendRef {group}/{kind} {name} is not supported by the gateway stand-in"

    # -- status ---------------------------------------------------------------------------------
    def _gateway_status(self, gateway: Any, programmed: bool, address: str, attached: int) -> None:
        meta = gateway["metadata"]
        status = ob.gateway_status(gateway, programmed, address, attached)
        self._write_status(ob.KEYS["Gateway"], meta["namespace"], meta["name"], gateway, status)

    def _route_status(
        self, route: Any, ns: str, gateway: str, problems: list[str], refused: list[str]
    ) -> None:
        ref = {"group": ob.GATEWAY_GROUP, "kind": "Gateway", "name": gateway}
        for given in (route.get("spec") or {}).get("parentRefs") or []:
            if given.get("name") == gateway:
                ref = dict(given)
        status = ob.parent_status(route, ref, problems, controller=True, refused=refused)
        self._write_status(ob.KEYS["HTTPRoute"], ns, route["metadata"]["name"], route, status)
        for rule in (route.get("spec") or {}).get("rules") or []:
            for backend in rule.get("backendRefs") or []:
                if backend.get("kind") == "InferencePool":
                    self._pool_status(ns, str(backend.get("name")), gateway)

    def _pool_status(self, ns: str, name: str, gateway: str) -> None:
        key = ob.KEYS["InferencePool"]
        pool_obj = self.store.try_get(key, ns, name) if key in self.store.storage_keys() else None
        backend = self._pools.get((ns, name))
        if pool_obj is None or backend is None:
            return
        ref = {"group": ob.GATEWAY_GROUP, "kind": "Gateway", "name": gateway}
        problems = [backend.error] if backend.error else []
        status = ob.parent_status(pool_obj, ref, problems, controller=False)
        self._write_status(key, ns, name, pool_obj, status)
