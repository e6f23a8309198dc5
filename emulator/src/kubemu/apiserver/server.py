"""The emulator as a running server: :class:`Emulator` owns the store, the HTTP site and
the shutdown hooks; it writes the kubeconfig clients use to reach it.

Use it in-process (``async with Emulator(shape) as emu:``) or through
``testbed cluster emulate``. Controllers started beside it register a shutdown hook
(:meth:`Emulator.on_shutdown`) so the processes they run end before the server does.
"""

from __future__ import annotations

import base64
import os
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from kubefacts.limits import MAX_REQUEST_BODY_BYTES
from kubemu.apiserver.api import Api
from kubemu.apiserver.nodes import ClusterShape, node_lease, node_manifest
from kubemu.machinery.handlers import SubresourceHandler
from kubemu.storage.store import Store

ShutdownHook = Callable[[], Awaitable[None]]


class Emulator:
    """An emulated Kubernetes API server on ``host:port`` (``port=0`` picks a free one)."""

    def __init__(
        self,
        shape: ClusterShape | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        rbac: bool = True,
    ) -> None:
        self.shape = shape or ClusterShape()
        self.host = host
        self.port = port
        #: The bearer token clients must send (written into the kubeconfig; never logged).
        self.token = token or secrets.token_urlsafe(24)
        self.store = Store()
        self.api = Api(self.store, self.token, rbac=rbac)
        self._runner: web.AppRunner | None = None
        self._hooks: list[ShutdownHook] = []
        self.ca_pem = b""

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    def on_shutdown(self, hook: ShutdownHook) -> None:
        """Await ``hook()`` when the emulator stops, before the server closes (last added first)."""
        self._hooks.append(hook)

    def add_subresource(self, key: str, subresource: str, handler: SubresourceHandler) -> None:
        """Serve e.g. ``pods/<name>/log`` with ``handler(request, namespace, name)``."""
        self.api.add_subresource(key, subresource, handler)

    def seed_nodes(self) -> None:
        """The shape's nodes, each with the heartbeat Lease a kubelet keeps in kube-node-lease."""
        for index in range(self.shape.nodes):
            node = self.store.create("nodes", node_manifest(self.shape, index))
            self.store.create("leases.coordination.k8s.io", node_lease(node), "kube-node-lease")

    async def start(self) -> None:
        self.seed_nodes()
        # kube-apiserver's MaxRequestBodyBytes: a larger body is its 413 (Api.handle)
        app = web.Application(client_max_size=MAX_REQUEST_BODY_BYTES)
        app.router.add_route("*", "/{tail:.*}", self.api.handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
        await self._runner.setup()
        from kubemu.apiserver.tls import self_signed, server_context

        self.ca_pem, key_pem = self_signed([self.host, "127.0.0.1", "localhost"])
        self.api.ca_pem = self.ca_pem  # the token controller puts it in token Secrets
        site = web.TCPSite(
            self._runner,
            self.host,
            self.port,
            backlog=1024,
            ssl_context=server_context(self.ca_pem, key_pem),
        )
        await site.start()
        server = getattr(site, "_server", None)
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            self.port = sockets[0].getsockname()[1]
        self.api.server_address = f"{self.host}:{self.port}"

    async def stop(self) -> None:
        """Run the shutdown hooks, end every watch, close the server."""
        try:
            for hook in reversed(self._hooks):
                await hook()
        finally:
            self._hooks.clear()
            self.store.close_watches()
            if self._runner is not None:
                await self._runner.cleanup()
                self._runner = None

    async def __aenter__(self) -> Emulator:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def kubeconfig(self, context: str = "testbed-emulator") -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": context,
                    "cluster": {
                        "server": self.url,
                        "certificate-authority-data": base64.b64encode(self.ca_pem).decode(),
                    },
                }
            ],
            "users": [{"name": context, "user": {"token": self.token}}],
            "contexts": [
                {
                    "name": context,
                    "context": {"cluster": context, "user": context, "namespace": "default"},
                }
            ],
            "current-context": context,
            "preferences": {},
        }

    def write_kubeconfig(self, path: Path, context: str = "testbed-emulator") -> Path:
        """Write a kubeconfig for this server (mode 0600: it holds the token)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            yaml.safe_dump(self.kubeconfig(context), handle, sort_keys=False)
        return path
