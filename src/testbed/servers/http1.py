"""The servers' HTTP/1.1, on ``asyncio.Protocol``: keep-alive, pipelining, chunked streams.

Written once for both servers of this package. The simulator (:mod:`.sim`) answers from
callbacks; the reference server (:mod:`.reference.http`) runs one task per request over the
same methods. No framework: a load test must never be limited by the simulator, so a request
costs one ``data_received`` callback, a split of the head, and (at zero latency) one
``write`` for the whole response. It reads bodies by Content-Length only (every client this
project meets sends one), answers ``Expect: 100-continue``, and serves one request at a time
per connection; pipelined requests wait in the buffer until the current response has ended.
A client that goes away mid-answer is told to the application by :attr:`Connection.on_lost`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from http import HTTPStatus
from typing import Protocol

MAX_HEAD = 64 * 1024
MAX_BODY = 16 * 1024 * 1024
#: The header that names a request; the answer echoes it, as proxies and vLLM do.
REQUEST_ID = "x-request-id"
MAX_REQUEST_ID = 256

#: Status lines by code, built once from the standard library's table: every response
#: writes one, and a load test must not wait on the simulator.
_STATUS_LINES = {int(s): f"HTTP/1.1 {int(s)} {s.phrase}\r\n".encode() for s in HTTPStatus}


def status_line(status: int) -> bytes:
    return _STATUS_LINES.get(status) or f"HTTP/1.1 {status} Error\r\n".encode()


class Request:
    """One parsed request. ``arrival`` is the loop time when its last byte was read."""

    __slots__ = ("arrival", "body", "headers", "keep_alive", "method", "path")

    def __init__(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        body: bytes,
        keep_alive: bool,
        arrival: float,
    ) -> None:
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        self.keep_alive = keep_alive
        self.arrival = arrival


class Handler(Protocol):
    """What the application offers the protocol: :class:`testbed.servers.sim.app.SimApp`,
    :class:`testbed.servers.reference.http.HttpDoor`."""

    #: Every connection from its creation (before ``connection_made``) until ``connection_lost``.
    connections: set[Connection]
    #: True once the server stops: a connection made from then on is reset at once.
    closing: bool

    def handle(self, request: Request, conn: Connection) -> None: ...


class Connection(asyncio.Protocol):
    """One client connection. The application answers through the methods below."""

    def __init__(self, app: Handler, loop: asyncio.AbstractEventLoop) -> None:
        self._app = app
        self._loop = loop
        self._transport: asyncio.Transport | None = None
        self._buffer = b""
        self._busy = False  # a request is being answered
        self._keep_alive = True
        self._continued = False  # 100 Continue already sent for the pending request
        #: The request id header echoed in the current answer's head (b"" when none came).
        self._echo = b""
        #: Called once if the client goes away while a request is being answered.
        self.on_lost: Callable[[], None] | None = None
        # Registered already here, not in connection_made: a connection accepted just before
        # the server stops is made a loop iteration later, and stopping must wait for it.
        app.connections.add(self)

    # -- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        if self._app.closing:
            transport.abort()  # accepted while the server stopped; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self._app.connections.discard(self)
        self._transport = None
        callback, self.on_lost = self.on_lost, None
        if callback is not None:
            callback()

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        if not self._busy:
            self._next_request()

    # -- answering
    @property
    def open(self) -> bool:
        return self._transport is not None and not self._transport.is_closing()

    def respond(self, status: int, body: bytes, content_type: bytes = b"application/json") -> None:
        """A whole response with Content-Length, in one write; ends the request."""
        head = (
            status_line(status)
            + self._echo
            + b"content-type: "
            + content_type
            + b"\r\ncontent-length: "
            + str(len(body)).encode()
            + (b"\r\n\r\n" if self._keep_alive else b"\r\nconnection: close\r\n\r\n")
        )
        self._write(head + body)
        self._done()

    def start_stream(self, content_type: bytes, first: bytes = b"", last: bool = False) -> None:
        """Headers of a chunked response, with the first chunk (and the end) in the same write."""
        head = (
            b"HTTP/1.1 200 OK\r\n"
            + self._echo
            + b"content-type: "
            + content_type
            + b"\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n"
            + (b"\r\n" if self._keep_alive else b"connection: close\r\n\r\n")
        )
        if first:
            head += b"%x\r\n%b\r\n" % (len(first), first)
        if last:
            head += b"0\r\n\r\n"
        self._write(head)
        if last:
            self._done()

    def send(self, data: bytes, last: bool = False) -> None:
        """One chunk of a streamed response; ``last`` also ends it."""
        out = b"%x\r\n%b\r\n" % (len(data), data) if data else b""
        if last:
            out += b"0\r\n\r\n"
        self._write(out)
        if last:
            self._done()

    def drop(self) -> None:
        """Close the connection now, mid-response (the disconnect fault)."""
        self.on_lost = None
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        """Reset the connection (server shutdown)."""
        if self._transport is not None:
            self._transport.abort()

    # -- internals
    def _write(self, data: bytes) -> None:
        if self._transport is not None:
            self._transport.write(data)

    def _done(self) -> None:
        self._busy = False
        self.on_lost = None
        if not self._keep_alive:
            if self._transport is not None:
                self._transport.close()
            return
        if self._buffer:
            # Pipelined requests: answered in order, from a fresh stack frame.
            self._loop.call_soon(self._next_request)

    def _next_request(self) -> None:
        if self._busy or self._transport is None:
            return
        buf = self._buffer
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > MAX_HEAD:
                self._fail(431)
            return
        try:
            method, path, version, headers = _parse_head(buf[:end])
            length = int(headers.get("content-length", "0") or "0")
        except ValueError:
            self._fail(400)
            return
        if "chunked" in headers.get("transfer-encoding", ""):
            self._fail(411)
            return
        if length > MAX_BODY or length < 0:
            self._fail(413)
            return
        start = end + 4
        if len(buf) - start < length:
            if not self._continued and headers.get("expect", "").lower() == "100-continue":
                self._continued = True
                self._write(b"HTTP/1.1 100 Continue\r\n\r\n")
            return
        body = buf[start : start + length]
        self._buffer = buf[start + length :]
        self._continued = False
        connection = headers.get("connection", "").lower()
        self._keep_alive = connection != "close" and (
            version == "HTTP/1.1" or connection == "keep-alive"
        )
        self._busy = True
        request_id = headers.get(REQUEST_ID)
        # echoed as it came (a header value has no line break); a runaway one is not
        self._echo = (
            b"x-request-id: " + request_id.encode("latin-1") + b"\r\n"
            if request_id and len(request_id) <= MAX_REQUEST_ID
            else b""
        )
        request = Request(method, path, headers, body, self._keep_alive, self._loop.time())
        self._app.handle(request, self)

    def _fail(self, status: int) -> None:
        """A protocol error: answer it and close (the stream position is lost)."""
        self._keep_alive = False
        self._buffer = b""
        self._busy = True
        self.respond(status, b'{"error":{"message":"malformed HTTP request","code":%d}}' % status)


def _parse_head(head: bytes) -> tuple[str, str, str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    method, target, version = lines[0].split(" ", 2)
    if not version.startswith("HTTP/1."):
        raise ValueError(version)
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise ValueError(line)
        headers[name.strip().lower()] = value.strip()
    path = target.split("?", 1)[0]
    return method, path, version, headers


def stop_accepting(server: asyncio.Server) -> None:
    """Take no more connections from ``server``'s listening sockets, leaving it open.

    On Python 3.11 a connection set up after ``Server.close()`` fails to attach to the closed
    server and leaks its socket, so a server stops accepting first and closes last.
    asyncio's selector loop accepts through a reader on each listening socket; other loops
    (uvloop) have none to remove and handle a connection racing ``close()`` themselves.
    """
    loop = server.get_loop()
    if isinstance(loop, asyncio.SelectorEventLoop):
        for sock in server.sockets:
            loop.remove_reader(sock.fileno())
