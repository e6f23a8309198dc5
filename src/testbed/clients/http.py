"""A lean asyncio HTTP/1.1 client: keep-alive pool, chunked decoding, one timestamp per read.

Why not httpx or aiohttp: the load probe must spend at most about a millisecond of CPU per
streamed request, and a general client spends several. This one is an ``asyncio.Protocol``
(no stream reader layers), parses only what a model server sends (status line, headers,
``Content-Length`` or chunked bodies), and hands every body fragment to a *sink* together
with the monotonic time at which the bytes were read from the socket.

A connection that closes before its response's head is complete raises
:class:`HttpClientError` (no answer came); one that closes after the head but before the
body's framing ended (Content-Length not reached, no last chunk) ends the response with the
sink's ``on_cut``: the server answered, then cut its answer short, and the sink (which knows
the protocol) makes that the response's error.

The I/O seam is the :data:`Connector`: a coroutine that, given a protocol factory, returns a
connected ``(transport, protocol)`` pair. :func:`tcp_connector` is the real one; tests pass
their own to feed scripted bytes (STYLE.md habit 9).
"""

from __future__ import annotations

import asyncio
import errno
import resource
import ssl
from collections.abc import Awaitable, Callable
from typing import Protocol
from urllib.parse import urlsplit

from testbed.clients.endpoint import Endpoint, Tls
from testbed.clients.tls import ssl_context
from testbed.core.clock import monotonic_ns
from testbed.core.errors import InfrastructureError
from testbed.core.secrets import resolve
from testbed.core.urls import DEFAULT_PORTS, check_base_url

Connector = Callable[
    [Callable[[], asyncio.Protocol]], Awaitable[tuple[asyncio.BaseTransport, asyncio.Protocol]]
]

#: How long :meth:`ConnectionPool.aclose` waits for connections to end (TLS shutdown).
_CLOSE_WAIT_S = 2.0

# Parser states of one response.
_HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_CRLF, _TRAILER, _UNTIL_CLOSE, _DONE = range(8)
#: States inside a body whose end its framing marks: a close there cuts the body short.
_BODY = frozenset((_LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_CRLF, _TRAILER))


class HttpClientError(InfrastructureError):
    """The connection failed or the server broke the HTTP protocol."""


class BodySink(Protocol):
    """Receives one response as it arrives; ``t_ns`` is when the bytes were read (or, for
    ``on_sent``, just before the request was written). A sink may also have
    ``on_connect(connect_ns)``, called before ``on_sent`` when a new connection had to be
    opened for the request (the time that took)."""

    def on_sent(self, t_ns: int) -> None: ...

    def on_head(self, status: int, headers: dict[str, str], t_ns: int) -> None: ...

    def on_data(self, data: bytes, t_ns: int) -> None: ...

    def on_end(self, t_ns: int) -> None: ...

    def on_cut(self, reason: str, t_ns: int) -> None:
        """The connection closed after the head, before the body's framing ended; nothing
        more comes (called instead of ``on_end``)."""


class _Discard:
    """A sink that keeps only the status (for :meth:`ConnectionPool.reachable`)."""

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


def _open_files_limit() -> int:
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


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
        except ssl.SSLCertVerificationError as exc:
            raise HttpClientError(
                f"TLS to {host}:{port}: certificate verify failed ({exc.verify_message}) —"
                " trust its CA with tls.ca_bundle (testbed load --ca-bundle), or skip the check"
                " with tls.verify: false (--insecure)"
            ) from exc
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE):  # ours, not the server's
                raise HttpClientError(
                    f"cannot connect to {host}:{port}: this process has no file descriptor"
                    f" left ({exc.strerror}; ulimit -n is {_open_files_limit()}) — fewer"
                    " requests in flight, or more load processes"
                ) from exc
            raise HttpClientError(
                f"cannot connect to {host}:{port}: {exc.strerror or exc};"
                " is the server running and the URL right?"
            ) from exc

    return connect


class _Connection(asyncio.Protocol):
    """One keep-alive connection running at most one request at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.lost: asyncio.Future[None] | None = None  # resolved by connection_lost
        self.reusable = False
        self.closed = False
        self._sink: BodySink | None = None
        self._done: asyncio.Future[None] | None = None
        self._buf = b""
        self._state = _DONE
        self._left = 0
        self._keep_alive = True
        self.got_bytes = False
        self.was_reused = False  # the current request runs on a connection used before
        self.used = False
        self.fresh = False  # opened for the request about to be sent (not warmed, not reused)

    # asyncio.Protocol -------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio.Transport but have the same methods.
        self.transport = transport  # type: ignore[assignment]
        self.lost = asyncio.get_running_loop().create_future()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.reusable = False
        if self.lost is not None and not self.lost.done():
            self.lost.set_result(None)
        if self._state == _UNTIL_CLOSE:
            self._finish(monotonic_ns())
        elif self._state in _BODY and self._sink is not None:
            self._finish(monotonic_ns(), cut=self._cut_reason(exc))
        elif self._done is not None and not self._done.done():
            reason = f": {exc}" if exc else ""
            self._done.set_exception(HttpClientError(f"connection closed mid-response{reason}"))

    def data_received(self, data: bytes) -> None:
        t_ns = monotonic_ns()
        self.got_bytes = True
        if self._sink is None:
            return  # bytes after a finished response: the connection will not be reused
        try:
            self._parse(self._buf + data if self._buf else data, t_ns)
        except Exception as exc:  # whatever a broken server sends ends this request only
            self._fail(HttpClientError(f"malformed HTTP response: {type(exc).__name__}: {exc}"))

    # requests ---------------------------------------------------------------------------
    def start(self, payload: bytes, sink: BodySink, done: asyncio.Future[None]) -> None:
        """Send one request; ``done`` resolves when the response has fully arrived."""
        assert self.transport is not None
        self._sink, self._done = sink, done
        self._buf, self._state, self.reusable, self.got_bytes = b"", _HEAD, False, False
        self.transport.write(payload)

    def abort(self) -> None:
        self.reusable = False
        self._sink = None
        if self.transport is not None:
            self.transport.abort()

    def _fail(self, exc: Exception) -> None:
        if self._done is not None and not self._done.done():
            self._done.set_exception(exc)
        self.abort()

    def _finish(self, t_ns: int, cut: str | None = None) -> None:
        sink, done = self._sink, self._done
        self._sink, self._state = None, _DONE
        self.reusable = self._keep_alive and not self.closed and not self._buf
        if sink is not None:
            if cut is None:
                sink.on_end(t_ns)
            else:
                sink.on_cut(cut, t_ns)
        if done is not None and not done.done():
            done.set_result(None)

    def _cut_reason(self, exc: Exception | None) -> str:
        """How the body was left unfinished, for the response's error."""
        if self._state == _LENGTH:
            what = f"{self._left} bytes of its Content-Length missing"
        else:
            what = "chunked body without its last chunk"
        return f"{what}{f': {exc}' if exc else ''}"

    # parsing ----------------------------------------------------------------------------
    def _parse(self, buf: bytes, t_ns: int) -> None:
        sink = self._sink
        assert sink is not None
        if self._state == _HEAD:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                self._buf = buf
                return
            self._head(buf[:end], t_ns)
            buf = buf[end + 4 :]
        state = self._state
        if state == _LENGTH:
            take = buf[: self._left]
            self._left -= len(take)
            if take:
                sink.on_data(take, t_ns)
            self._buf = b""
            if self._left == 0:
                self._finish(t_ns)
        elif state == _UNTIL_CLOSE:
            if buf:
                sink.on_data(buf, t_ns)
            self._buf = b""
        elif state != _DONE:
            self._chunked(buf, t_ns, sink)

    def _head(self, head: bytes, t_ns: int) -> None:
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/"):
            raise ValueError(f"bad status line {lines[0]!r}")
        status = int(parts[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        conn = headers.get("connection", "").lower()
        self._keep_alive = conn != "close" and not (parts[0] == "HTTP/1.0" and conn != "keep-alive")
        assert self._sink is not None
        self._sink.on_head(status, headers, t_ns)
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._state = _CHUNK_SIZE
        elif "content-length" in headers:
            self._left = int(headers["content-length"])
            self._state = _LENGTH
            if self._left == 0:
                self._finish(t_ns)
        elif status in (204, 304) or 100 <= status < 200:
            self._finish(t_ns)
        else:
            self._keep_alive = False
            self._state = _UNTIL_CLOSE

    def _chunked(self, buf: bytes, t_ns: int, sink: BodySink) -> None:
        pos, size, state, left = 0, len(buf), self._state, self._left
        pieces: list[bytes] = []
        while pos < size:
            if state == _CHUNK_DATA:
                end = min(size, pos + left)
                pieces.append(buf[pos:end])
                left -= end - pos
                pos = end
                if left == 0:
                    state = _CHUNK_CRLF
            elif state == _CHUNK_CRLF:
                if size - pos < 2:
                    break
                pos += 2
                state = _CHUNK_SIZE
            elif state == _CHUNK_SIZE:
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    break
                left = int(buf[pos:eol].split(b";", 1)[0], 16)
                pos = eol + 2
                state = _CHUNK_DATA if left else _TRAILER
            else:  # _TRAILER: header lines until an empty one
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    break
                empty = eol == pos
                pos = eol + 2
                if empty:
                    self._buf = buf[pos:]
                    if pieces:
                        sink.on_data(b"".join(pieces), t_ns)
                    self._finish(t_ns)
                    return
        self._buf = buf[pos:]
        self._state, self._left = state, left
        if pieces:
            sink.on_data(pieces[0] if len(pieces) == 1 else b"".join(pieces), t_ns)


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
        self._idle: list[_Connection] = []
        self._slots = asyncio.Semaphore(max_connections)
        self._open: set[_Connection] = set()
        self._closing: set[_Connection] = set()  # closed by us, not yet gone

    def encode(self, method: str, path: str, body: bytes | None = None) -> bytes:
        """The bytes of one request; build once and reuse for repeated requests."""
        head = f"{method} {self.base_path}{path} {self._prefix}"
        if body is None:
            return f"{head}\r\n".encode("latin-1")
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        return head.encode("latin-1") + body

    async def send(self, payload: bytes, sink: BodySink, timeout_s: float | None = None) -> int:
        """Send encoded ``payload``; feed the response to ``sink``; return the send time (ns).

        A connection that turns out closed before any byte came back is retried once on a
        fresh one (the server may close idle keep-alive connections at any moment).
        """
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
        probe = _Discard()
        try:
            await self.send(self.encode("GET", "/health"), probe, timeout_s)
        except (HttpClientError, TimeoutError):
            return False
        return probe.status > 0

    async def warm(self, connections: int) -> None:
        """Open connections ahead of a load stage so that its first requests do not pay
        for the TCP handshake; they wait idle in the pool."""
        missing = connections - len(self._open)
        if missing <= 0:
            return
        fresh = await asyncio.gather(*(self._connector(_Connection) for _ in range(missing)))
        for _, protocol in fresh:
            assert isinstance(protocol, _Connection)
            protocol.was_reused = False
            self._open.add(protocol)
            self._idle.append(protocol)

    async def _acquire(self) -> _Connection:
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                conn.was_reused = conn.used
                conn.used = True
                return conn
            self._open.discard(conn)
        _, protocol = await self._connector(_Connection)
        assert isinstance(protocol, _Connection)
        protocol.was_reused, protocol.used, protocol.fresh = False, True, True
        self._open.add(protocol)
        return protocol

    def _release(self, conn: _Connection) -> None:
        if conn.reusable:
            self._idle.append(conn)
        else:
            self._drop(conn)

    def _drop(self, conn: _Connection) -> None:
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
