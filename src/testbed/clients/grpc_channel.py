"""A gRPC channel on the event loop: calls over one cleartext HTTP/2 connection at a time.

Why not grpcio's aio channel: its threads and the hand-offs between them cost the load
generator about 5 ms of CPU per streamed 64-token request, where an HTTP/1.1 stream on
:mod:`testbed.clients.http1` costs a twentieth of that. Here a message is handed to the
caller's ``on_message`` inside ``data_received`` (:mod:`testbed.clients.grpc_h2`), with the
time its bytes were read; a call awaits one future.

The channel speaks HTTP/2 with prior knowledge (``h2c``, no TLS: TGIS deployments serve
their gRPC port in the clear, and testbed's servers do). It opens a connection on first use,
shares it between all calls, and opens a new one when the server sends GOAWAY or the
connection closes; a call the server never processed (above a GOAWAY's last stream id, or
refused) is retried once on the new connection. Request headers are built once per method
and deadline (:func:`~testbed.wire.h2.request_block`). The I/O seam is the
:data:`~testbed.clients.http.Connector`, as for the HTTP pool.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from testbed.clients.grpc_h2 import GrpcConnection
from testbed.clients.grpc_stream import GrpcError, OnMessage
from testbed.clients.http import Connector
from testbed.wire import h2

__all__ = ["GrpcChannel", "GrpcError", "split_target"]

#: Seconds to wait for the server's first SETTINGS on a new connection.
HANDSHAKE_TIMEOUT_S = 10.0


def split_target(target: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port``) → host and port."""
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"not a gRPC target host:port: {target!r}")
    return host.strip("[]"), int(port)


def tcp(host: str, port: int) -> Connector:
    async def connect(
        factory: Callable[[], asyncio.Protocol],
    ) -> tuple[asyncio.BaseTransport, asyncio.Protocol]:
        return await asyncio.get_running_loop().create_connection(factory, host, port)

    return connect


class GrpcChannel:
    """Calls to one ``host:port``; ``metadata`` goes with every call (never logged)."""

    def __init__(
        self,
        target: str,
        *,
        metadata: tuple[tuple[str, str], ...] = (),
        connector: Connector | None = None,
    ) -> None:
        self.target = target
        host, port = split_target(target)
        self._connector = connector or tcp(host, port)
        self._metadata = metadata
        self._blocks: dict[tuple[str, float | None], bytes] = {}
        self._conn: GrpcConnection | None = None
        self._all: set[GrpcConnection] = set()
        self._lock = asyncio.Lock()

    async def call(
        self,
        path: str,
        message: bytes,
        on_message: OnMessage,
        timeout_s: float | None = None,
        request_id: str | None = None,
    ) -> None:
        """Call ``path`` with one serialized request ``message``; each answer message goes
        to ``on_message(bytes, t_ns)``. Raises :class:`GrpcError` unless the status is OK,
        :class:`TimeoutError` after ``timeout_s`` (the call is cancelled on the server).
        ``request_id`` goes as ``x-request-id`` metadata (the server's log names it)."""
        block = self._blocks.get((path, timeout_s))
        if block is None:
            block = h2.request_block(path, self.target, self._metadata)
            if timeout_s is not None:
                block += h2.timeout_field(timeout_s)
            self._blocks[(path, timeout_s)] = block
        if request_id is not None:
            block += h2.literal("x-request-id", request_id)
        async with asyncio.timeout(timeout_s):
            for attempt in (0, 1):
                conn = await self.connection()
                while not conn.has_slot() and not conn.draining:
                    await conn.slot()
                if conn.draining:
                    continue  # the server is going away: the next connection
                stream = conn.open(block, message, on_message)
                try:
                    await stream.done
                    return
                except GrpcError as exc:
                    if not (exc.retryable and attempt == 0):
                        raise
                except BaseException:  # timed out or cancelled: the server stops too
                    conn.reset(stream)
                    raise
        raise GrpcError("UNAVAILABLE", "the server went away twice before the call started")

    async def unary(
        self,
        path: str,
        message: bytes,
        timeout_s: float | None = None,
        request_id: str | None = None,
    ) -> tuple[bytes, int]:
        """A call with one answer: its bytes and the time they were read."""
        got: list[tuple[bytes, int]] = []
        each: OnMessage = lambda data, t_ns: got.append((data, t_ns))  # noqa: E731
        await self.call(path, message, each, timeout_s, request_id)
        if len(got) != 1:
            raise GrpcError("INTERNAL", f"{len(got)} response messages to a unary call")
        return got[0]

    async def connection(self) -> GrpcConnection:
        """The shared connection, opened (and its SETTINGS exchanged) if need be."""
        conn = self._conn
        if conn is not None and conn.usable:
            return conn
        async with self._lock:
            conn = self._conn
            if conn is None or not conn.usable:
                conn = self._conn = await self._open()
            return conn

    async def _open(self) -> GrpcConnection:
        try:
            _, protocol = await self._connector(GrpcConnection)
        except OSError as exc:
            raise GrpcError(
                "UNAVAILABLE", f"failed to connect: {exc.strerror or exc}", answered=False,
                connecting=True,
            ) from exc  # fmt: skip
        assert isinstance(protocol, GrpcConnection)
        self._all.add(protocol)
        protocol.lost.add_done_callback(lambda _: self._all.discard(protocol))
        try:
            async with asyncio.timeout(HANDSHAKE_TIMEOUT_S):
                spoke = await protocol.ready
        except TimeoutError:
            protocol.close()
            why = f"no HTTP/2 SETTINGS from the server within {HANDSHAKE_TIMEOUT_S:g} s"
            raise GrpcError("UNAVAILABLE", why, answered=False, connecting=True) from None
        if not spoke:
            why = protocol.goaway_reason or "the server closed the connection"
            raise GrpcError(
                "UNAVAILABLE", f"{why} before its HTTP/2 SETTINGS (not a gRPC port?)",
                answered=False, connecting=True,
            )  # fmt: skip
        return protocol

    @property
    def open_connections(self) -> int:
        return len(self._all)

    async def aclose(self) -> None:
        """Close every connection; calls still running fail with UNAVAILABLE."""
        conns = list(self._all)
        self._conn = None
        for conn in conns:
            conn.close()
        waiting = [c.lost for c in conns if not c.lost.done()]
        if waiting:
            await asyncio.wait(waiting, timeout=2.0)
        for conn in conns:
            if not conn.closed and conn.transport is not None:
                conn.transport.abort()
        await asyncio.sleep(0)
