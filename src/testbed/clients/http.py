"""A lean asyncio HTTP/1.1 client: a keep-alive connection pool to one origin.

Why not httpx or aiohttp: the load probe must spend at most about a millisecond of CPU per
streamed request, and a general client spends several. The pool lends out
:class:`~testbed.clients.http1.Http1Connection` objects (HTTP/1.1 framing, one timestamp per
read, the :class:`~testbed.clients.http1.BodySink` a response is fed to) one request at a
time; its errors are :mod:`testbed.clients.http_errors`' (re-exported here).

The I/O seam is the :data:`Connector`: a coroutine that, given a protocol factory, returns a
connected ``(transport, protocol)`` pair. :func:`tcp_connector` is the real one; tests pass
their own to feed scripted bytes (STYLE.md habit 9).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from testbed.clients.endpoint import Endpoint, Tls
from testbed.clients.http1 import CONNECTION, BodySink, Http1Connection
from testbed.clients.http_errors import (
    ConnectError,
    ConnectTimeout,
    HttpClientError,
    ReadTimeout,
    RemoteProtocolError,
    ServerStatusError,
    TimeoutException,
    connect_error,
)
from testbed.clients.tls import ssl_context
from testbed.core.clock import monotonic_ns
from testbed.core.secrets import resolve
from testbed.core.urls import DEFAULT_PORTS, check_base_url

__all__ = [
    "BodySink",
    "ConnectError",
    "ConnectTimeout",
    "ConnectionPool",
    "Connector",
    "HttpClientError",
    "ReadTimeout",
    "RemoteProtocolError",
    "ServerStatusError",
    "StatusSink",
    "TimeoutException",
    "pool_for",
    "tcp_connector",
]

Connector = Callable[
    [Callable[[], asyncio.Protocol]], Awaitable[tuple[asyncio.BaseTransport, asyncio.Protocol]]
]

#: How long :meth:`ConnectionPool.aclose` waits for connections to end (TLS shutdown).
_CLOSE_WAIT_S = 2.0


class StatusSink:
    """A sink that keeps only the status and discards the body (what
    :meth:`ConnectionPool.reachable` needs); a sink that keeps more overrides the rest."""

    status = 0

    def on_sent(self, t_ns: int) -> None:
        del t_ns

    def on_head(self, status: int, headers: dict[str, str], t_ns: int) -> None:
        del headers, t_ns
        self.status = status

    def on_data(self, data: bytes, t_ns: int) -> None:
        del data, t_ns

    def on_end(self, t_ns: int) -> None:
        del t_ns

    def on_cut(self, reason: str, t_ns: int) -> None:
        del reason, t_ns


def tcp_connector(host: str, port: int, tls: ssl.SSLContext | None = None) -> Connector:
    """The real connector: a TCP connection to ``host:port`` (asyncio turns Nagle off),
    wrapped in TLS when ``tls`` is given."""

    async def connect(
        factory: Callable[[], asyncio.Protocol],
    ) -> tuple[asyncio.BaseTransport, asyncio.Protocol]:
        loop = asyncio.get_running_loop()
        try:
            return await loop.create_connection(
                factory, host, port, ssl=tls, server_hostname=host if tls else None
            )
        except OSError as exc:  # ssl.SSLCertVerificationError is one too
            raise connect_error(host, port, exc) from exc

    return connect


def with_header(payload: bytes, name: bytes, value: bytes) -> bytes:
    """An encoded request with one more header, after its request line: a slice and a join
    (4.5 µs per request measured with timeit at load average 11 on 2 cores, against
    0.3–1.2 ms of the load generator's CPU per request in bench/load_cost.py)."""
    end = payload.index(b"\r\n") + 2
    return b"".join((payload[:end], name, b": ", value, b"\r\n", payload[end:]))


class ConnectionPool:
    """Keep-alive HTTP/1.1 connections to one origin; one request per connection at a time.

    ``headers`` are sent with every request (e.g. ``Authorization``; never logged).
    ``max_connections`` bounds the open connections; callers beyond it wait for one.
    An ``https://`` URL is spoken over TLS, checked as ``tls`` says.
    """

    def __init__(
        self,
        base_url: str,
        *,
        connector: Connector | None = None,
        headers: dict[str, str] | None = None,
        max_connections: int = 1024,
        tls: Tls | None = None,
    ) -> None:
        parts = urlsplit(check_base_url(base_url))  # InputError if it is none
        assert parts.hostname is not None
        self.base_path = parts.path.rstrip("/")
        default = DEFAULT_PORTS[parts.scheme]
        port = parts.port or default
        host_header = parts.hostname if port == default else f"{parts.hostname}:{port}"
        context = ssl_context(tls or Tls()) if parts.scheme == "https" else None
        self._connector = connector or tcp_connector(parts.hostname, port, context)
        extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        self._prefix = f"HTTP/1.1\r\nHost: {host_header}\r\n{extra}"
        self._idle: list[Http1Connection] = []
        self._slots = asyncio.Semaphore(max_connections)
        self._open: set[Http1Connection] = set()
        self._closing: set[Http1Connection] = set()  # closed by us, not yet gone

    def encode(self, method: str, path: str, body: bytes | None = None) -> bytes:
        """The bytes of one request; build once and reuse for repeated requests."""
        head = f"{method} {self.base_path}{path} {self._prefix}"
        if body is None:
            return f"{head}\r\n".encode("latin-1")
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        return head.encode("latin-1") + body

    async def send(
        self,
        payload: bytes,
        sink: BodySink,
        timeout_s: float | None = None,
        request_id: str | None = None,
    ) -> int:
        """Send encoded ``payload``; feed the response to ``sink``; return the send time (ns).

        ``request_id`` goes as the ``x-request-id`` header (what a server's or a proxy's log
        names the request by). A connection that turns out closed before any byte came back
        is retried once on a fresh one (the server may close idle keep-alive connections at
        any moment).
        """
        if request_id is not None:
            payload = with_header(payload, b"x-request-id", request_id.encode("latin-1"))
        async with self._slots:
            for attempt in (0, 1):
                t_acquire = monotonic_ns()
                conn = await self._acquire()
                done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                t_sent = monotonic_ns()
                if conn.fresh:
                    conn.fresh = False
                    on_connect = getattr(sink, "on_connect", None)
                    if on_connect is not None:
                        on_connect(t_sent - t_acquire)
                sink.on_sent(t_sent)
                conn.start(payload, sink, done)
                try:
                    async with asyncio.timeout(timeout_s):
                        await done
                except HttpClientError:
                    self._drop(conn)
                    if attempt == 0 and not conn.got_bytes:
                        continue
                    raise
                except TimeoutError as exc:  # asyncio's: the answer did not complete in time
                    conn.abort()
                    self._drop(conn)
                    raise ReadTimeout(f"no complete answer within {timeout_s:g} s") from exc
                except BaseException:
                    conn.abort()
                    self._drop(conn)
                    raise
                self._release(conn)
                return t_sent
        raise AssertionError("unreachable")

    async def reachable(self, timeout_s: float = 2.0) -> bool:
        """Whether the server answers a new request now (``GET /health``, any status): after
        an answer cut short, it tells a server that cut it from one that went away. A dying
        process's listening socket may still accept a connection, so a connection alone
        proves nothing; an answer does."""
        probe = StatusSink()
        try:
            await self.send(self.encode("GET", "/health"), probe, timeout_s)
        except HttpClientError:
            return False
        return probe.status > 0

    async def warm(self, connections: int) -> None:
        """Open connections ahead of a load stage so that its first requests do not pay
        for the TCP handshake; they wait idle in the pool."""
        missing = connections - len(self._open)
        if missing <= 0:
            return
        fresh = await asyncio.gather(*(self._connector(CONNECTION) for _ in range(missing)))
        for _, protocol in fresh:
            assert isinstance(protocol, Http1Connection)
            protocol.was_reused = False
            self._open.add(protocol)
            self._idle.append(protocol)

    async def _acquire(self) -> Http1Connection:
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                conn.was_reused = conn.used
                conn.used = True
                return conn
            self._open.discard(conn)
        _, protocol = await self._connector(CONNECTION)
        assert isinstance(protocol, Http1Connection)
        protocol.was_reused, protocol.used, protocol.fresh = False, True, True
        self._open.add(protocol)
        return protocol

    def _release(self, conn: Http1Connection) -> None:
        if conn.reusable:
            self._idle.append(conn)
        else:
            self._drop(conn)

    def _drop(self, conn: Http1Connection) -> None:
        self._open.discard(conn)
        if conn.transport is not None and not conn.closed:
            conn.transport.close()
            if conn.lost is not None:
                self._closing.add(conn)
                conn.lost.add_done_callback(lambda _: self._closing.discard(conn))

    @property
    def open_connections(self) -> int:
        return len(self._open)

    async def aclose(self) -> None:
        """Close every connection (idle or not) and wait until each is gone: a TLS
        connection ends with a shutdown exchange, which a closed event loop cannot finish.
        One that does not end within :data:`_CLOSE_WAIT_S` is aborted."""
        for conn in list(self._open):
            self._drop(conn)
        self._idle.clear()
        closing = list(self._closing)
        waiting = [c.lost for c in closing if c.lost is not None and not c.lost.done()]
        if waiting:
            await asyncio.wait(waiting, timeout=_CLOSE_WAIT_S)
        for conn in closing:
            if not conn.closed and conn.transport is not None:
                conn.transport.abort()
        await asyncio.sleep(0)  # let aborted transports run their close callbacks


def pool_for(
    endpoint: Endpoint, *, connector: Connector | None = None, max_connections: int = 1024
) -> ConnectionPool:
    """A pool for ``endpoint``, with its API key (resolved now, never logged) as a bearer
    token."""
    headers = {}
    if endpoint.api_key:
        headers["Authorization"] = f"Bearer {resolve(endpoint.api_key)}"
    return ConnectionPool(
        endpoint.base_url,
        connector=connector,
        headers=headers,
        max_connections=max_connections,
        tls=endpoint.tls,
    )
