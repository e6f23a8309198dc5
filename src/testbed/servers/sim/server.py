"""Starting and stopping the simulator: in the current loop, in a thread, or as the CLI's server.

``async with running_sim(SimParams(...)) as url`` serves in the running loop (tests, the local
backend's in-process use). :class:`SimServer` is the same with access to the app's metrics.
``serve_in_thread`` runs one in a background thread with its own precise loop, for sync code.
:func:`serve` is what ``testbed serve sim`` runs until asked to stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any

from testbed.config.sim import SimParams
from testbed.core.errors import ServerCrashed, ServerStartError
from testbed.servers.http1 import Connection, stop_accepting
from testbed.servers.sim.app import SimApp
from testbed.servers.sim.loop import precise_event_loop
from testbed.servers.sim.metrics import SimMetrics

if TYPE_CHECKING:
    from testbed.servers.sim.h2 import Door  # imported only when tgis is served

#: Loop iterations :meth:`SimServer.stop` waits at most for reset connections to be lost.
_SETTLE_ITERATIONS = 100


def url_for(host: str, port: int, scheme: str = "http") -> str:
    """The URL a client on this machine uses for a server bound to ``host``."""
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}:{port}"


class SimServer:
    """A simulator listening on ``host:port`` (port 0: a free one) in the current loop;
    over TLS (``https://``) when given a server ``tls`` context."""

    def __init__(
        self,
        params: SimParams | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        tls: ssl.SSLContext | None = None,
        grpc_port: int = 0,
    ) -> None:
        self.params = params or SimParams()
        self.host = host
        self.port = port
        self.tls = tls
        self.grpc_port = grpc_port  # TGIS over gRPC, when params.protocols has tgis
        self._server: asyncio.Server | None = None
        self._app: SimApp | None = None
        self._grpc: asyncio.Server | None = None
        self._grpc_door: Door | None = None

    @property
    def url(self) -> str:
        return url_for(self.host, self.port, "https" if self.tls else "http")

    @property
    def metrics(self) -> SimMetrics:
        """Live counters (read them from the loop's thread)."""
        assert self._app is not None, "the server is not started"
        return self._app.metrics

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        app = SimApp(self.params, loop)
        if "tgis" in self.params.protocols:  # first: ready over HTTP means ready over gRPC
            from testbed.servers.sim.tgis import start_grpc

            self._grpc, self._grpc_door = await start_grpc(app, self.host, self.grpc_port)
            self.grpc_port = self._grpc.sockets[0].getsockname()[1]
        try:
            server = await loop.create_server(
                lambda: Connection(app, loop),
                self.host,
                self.port,
                reuse_address=True,
                ssl=self.tls,
            )
        except OSError as exc:
            await self._stop_grpc()
            raise ServerStartError(
                f"the simulator cannot listen on {self.host}:{self.port}: {exc.strerror}"
                " (choose another --port, or 0 for a free one)"
            ) from exc
        self._app, self._server = app, server
        self.port = server.sockets[0].getsockname()[1]

    @property
    def grpc_target(self) -> str | None:
        """``host:port`` of the gRPC service (None when tgis is not served)."""
        if self._grpc is None:
            return None
        return url_for(self.host, self.grpc_port).removeprefix("http://")

    async def stop(self) -> None:
        """Stop listening, reset open connections, let their deliveries cancel their timers.

        Returns once every connection is released, also one accepted just before: its accept
        task runs on the next loop iteration and makes the connection after that, which
        ``closing`` resets. The listening sockets stop accepting first and the server closes
        last, because on Python 3.11 a connection set up after ``Server.close()`` fails to
        attach to the closed server and leaks its socket.
        """
        server, app = self._server, self._app
        if server is None or app is None:
            return
        self._server = None
        await self._stop_grpc()  # its calls are cancelled: their jobs free their slots
        app.closing = True
        stop_accepting(server)
        for conn in list(app.connections):
            conn.abort()
        app.pacer.close()
        # One loop iteration per step (accept task, connection_made, connection_lost); the
        # bound only guards against a transport that never reports its loss.
        for _ in range(_SETTLE_ITERATIONS):
            await asyncio.sleep(0)
            if not app.connections:
                break
        server.close()
        await server.wait_closed()

    async def _stop_grpc(self) -> None:
        """GOAWAY on every gRPC connection, its calls cancelled, the listener closed."""
        grpc, self._grpc = self._grpc, None
        if grpc is None:
            return
        door = self._grpc_door
        assert door is not None
        door.closing = True
        stop_accepting(grpc)
        for conn in list(door.connections):
            conn.goaway()
        for _ in range(_SETTLE_ITERATIONS):
            await asyncio.sleep(0)
            if not door.connections:
                break
        for conn in list(door.connections):
            conn.abort()
        grpc.close()
        await grpc.wait_closed()

    async def __aenter__(self) -> SimServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()


@contextlib.asynccontextmanager
async def running_sim(
    params: SimParams | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    tls: ssl.SSLContext | None = None,
) -> AsyncIterator[str]:
    """Serve the simulator in the running loop; yields its base URL (no trailing slash)."""
    async with SimServer(params, host=host, port=port, tls=tls) as server:
        yield server.url


@contextlib.contextmanager
def serve_in_thread(
    params: SimParams | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    tls: ssl.SSLContext | None = None,
    grpc_port: int = 0,
) -> Iterator[str]:
    """Serve the simulator from a background thread with a precise loop; yields its URL
    (its gRPC port is ``grpc_port`` when ``params.protocols`` has tgis).

    A failure in that thread (of the server, or of a callback of its loop) is not lost: it
    is raised as :class:`ServerCrashed` when the block ends.
    """
    loop = precise_event_loop()
    started = threading.Event()
    server = SimServer(params, host=host, port=port, tls=tls, grpc_port=grpc_port)
    stop = asyncio.Event()
    failures: list[BaseException] = []

    async def main() -> None:
        try:
            await server.start()
        finally:
            started.set()
        try:
            await stop.wait()
        finally:
            await server.stop()

    thread = threading.Thread(
        target=_run_reporting, args=(loop, main(), failures), name="testbed-sim", daemon=True
    )
    thread.start()
    started.wait()
    if failures:
        thread.join()
        raise failures[0]
    try:
        yield server.url
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join()
    if failures:
        first = failures[0]
        raise ServerCrashed(
            f"the simulator's thread failed ({len(failures)} error(s)); first:"
            f" {type(first).__name__}: {first}"
        ) from first


def _run_reporting(
    loop: asyncio.AbstractEventLoop, main: Coroutine[Any, Any, None], failures: list[BaseException]
) -> None:
    """Run ``main`` in ``loop`` (this thread's); every error — of ``main`` or of any callback
    the loop runs — is appended to ``failures`` for the thread that waits on this one."""

    def collect(_loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        error = context.get("exception")
        failures.append(error if error is not None else RuntimeError(context["message"]))

    asyncio.set_event_loop(loop)
    loop.set_exception_handler(collect)
    try:
        loop.run_until_complete(main)
    except Exception as exc:  # handed to the caller's thread, which raises it
        failures.append(exc)
    finally:
        loop.close()


async def serve(
    params: SimParams,
    *,
    host: str,
    port: int,
    stop: asyncio.Event,
    on_listening: Callable[[str], None],
    grpc_port: int = 0,
    on_grpc: Callable[[str], None] = lambda _target: None,
) -> None:
    """Serve until ``stop`` is set; ``on_listening(url)`` is called once the port is open,
    after ``on_grpc(host:port)`` when gRPC is served too."""
    async with SimServer(params, host=host, port=port, grpc_port=grpc_port) as server:
        if server.grpc_target is not None:
            on_grpc(server.grpc_target)
        on_listening(server.url)
        await stop.wait()
