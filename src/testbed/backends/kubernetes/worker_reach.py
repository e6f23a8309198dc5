"""How the probes reach a worker's server: its Service from inside the cluster, else
port-forwards to its pod from here.

A port-forward that finds nothing listening sets the worker's ``died`` future, so a server
that stopped answering ends the treatment instead of timing out request by request.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

from testbed.backends.kubernetes.launch import ServerLaunch
from testbed.backends.kubernetes.names import worker_name
from testbed.clients.kube import Kube, PortForward


@contextlib.asynccontextmanager
async def reach(
    kube: Kube,
    namespace: str,
    pod: str,
    worker_id: str,
    launch: ServerLaunch,
    died: asyncio.Future[str],
    in_cluster: bool,
) -> AsyncIterator[tuple[str, str | None]]:
    """``(base URL, TGIS gRPC target or None)`` of the worker's server (its ports are the
    ``launch``'s): its Service in the cluster (``in_cluster``), else port-forwards from
    here; ``died`` is set when a forwarded port finds nothing listening."""
    port, grpc = launch.http_port, launch.grpc_port
    if in_cluster:
        host = f"{worker_name(worker_id)}.{namespace}.svc"
        yield f"http://{host}:{port}", f"{host}:{grpc}" if grpc else None
        return

    def refused(which: int) -> Callable[[str], None]:
        def note(message: str) -> None:
            if not died.done():
                died.set_result(f"pod {pod} does not answer on port {which}: {message}")

        return note

    async with contextlib.AsyncExitStack() as stack:
        local = await stack.enter_async_context(
            PortForward(kube.api, namespace, pod, port, refused(port))
        )
        target = None
        if grpc:
            grpc_local = await stack.enter_async_context(
                PortForward(kube.api, namespace, pod, grpc, refused(grpc))
            )
            target = f"127.0.0.1:{grpc_local}"
        yield f"http://127.0.0.1:{local}", target
