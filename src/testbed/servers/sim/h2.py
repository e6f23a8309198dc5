"""A lean cleartext HTTP/2 server for unary-request gRPC calls, on ``asyncio.Protocol``.

The simulator's gRPC door (TGIS's ``fmaas.GenerationService``). Like its HTTP/1.1 server
(:mod:`testbed.servers.http1`), it must never be what limits a load test, and it writes
what the app hands it as the app hands it: whatever the app answers in one go (a whole
stream at zero latency) leaves in one ``write`` — headers, DATA and trailers — and each
token written on its deadline leaves at once in its own DATA frame. (grpcio's server,
used before, sent every message in its own segment and cost ~25× the HTTP door's CPU.)

What it speaks (RFC 9113, grpc/doc/PROTOCOL-HTTP2.md): the connection preface, SETTINGS
and their ACK, PING, flow control both ways (what it sends waits for the client's windows;
what it reads is given back when half a window is used), header blocks in HEADERS and
CONTINUATION frames (decoded by the ``hpack`` package: clients index and Huffman-code),
padding, RST_STREAM from the client (the call is cancelled), GOAWAY both ways (stopping
the server sends one, then cancels its calls), ``grpc-timeout`` (DEADLINE_EXCEEDED, as
grpcio's server answers), Trailers-Only answers, 415 for a request that is not gRPC.
Each call carries one request message (every TGIS method is unary or server-streaming);
messages are not compressed (``grpc-encoding`` other than identity is UNIMPLEMENTED).

What every HTTP/2 connection does is :class:`~testbed.wire.h2_connection.H2Connection`'s,
shared with testbed's gRPC client; this module adds the server's role.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from testbed.servers.sim.h2_call import Call
from testbed.wire import h2 as w
from testbed.wire.h2_connection import H2Connection

#: The windows this server opens for what clients send (requests are small).
STREAM_WINDOW = 1 << 22
CONNECTION_WINDOW = 1 << 24
MAX_MESSAGE = 4 * 1024 * 1024  # grpcio's default limit for a received message


class Door:
    """What a listening server shares with its connections: the handler every complete
    request goes to, the live connections, and whether the server is stopping."""

    def __init__(self, handler: Callable[[Call], None]) -> None:
        self.handler = handler
        #: Every connection from its creation (before ``connection_made``) until it is lost.
        self.connections: set[H2ServerConnection] = set()
        #: True once the server stops: a connection made from then on is reset at once.
        self.closing = False


class H2ServerConnection(H2Connection[Call]):
    """One client connection; every complete request goes to the door's handler."""

    STREAM_WINDOW = STREAM_WINDOW
    CONNECTION_WINDOW = CONNECTION_WINDOW
    SERVES = True

    def __init__(self, door: Door) -> None:
        super().__init__()
        self._door = door
        self._loop = asyncio.get_running_loop()
        self._draining = False  # GOAWAY sent or received: no new calls
        door.connections.add(self)

    # asyncio.Protocol -------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        if self._door.closing:
            transport.abort()  # accepted while the server stopped; connection_lost follows
            return
        ours = {w.INITIAL_WINDOW_SIZE: STREAM_WINDOW, w.MAX_HEADER_LIST_SIZE: 16 * 1024}
        grow = w.window_update(0, CONNECTION_WINDOW - w.DEFAULT_WINDOW)
        transport.write(w.settings(ours) + grow)

    def connection_lost(self, exc: Exception | None) -> None:
        self._door.connections.discard(self)
        self.transport = None
        calls, self.streams = list(self.streams.values()), {}
        for call in calls:
            call.cancelled()

    # writing, for the calls -------------------------------------------------------------
    def write_data(self, call: Call, messages: bytes) -> None:
        head = b""
        if not call.headers_sent:
            call.headers_sent = True
            head = w.frame(w.HEADERS, w.END_HEADERS, call.id, w.RESPONSE_BLOCK)
        self.send_data(call, messages, head)

    def write_trailers(self, call: Call, block: bytes) -> None:
        if not call.headers_sent:  # Trailers-Only
            call.headers_sent = True
            block = w.RESPONSE_BLOCK + block
        trailers = w.header_frames(call.id, block, self.max_frame, end_stream=True)
        if call.pending:
            call.trailers = trailers  # after the DATA still waiting for a window
        else:
            self.write(trailers)
            self._closed(call)

    def reset(self, call: Call, code: int) -> None:
        """RST_STREAM for ``call`` (after its trailers: the client stops sending)."""
        if self.streams.pop(call.id, None) is not None:
            self.unblock(call)
            call.trailers = None
        self.write(w.rst_stream(call.id, code))

    def goaway(self) -> None:
        """Stop: GOAWAY (the calls already read are cancelled, none is taken after), close."""
        self._draining = True
        self.write(w.goaway(self.last_peer_stream, w.NO_ERROR))
        calls, self.streams = list(self.streams.values()), {}
        for call in calls:
            if not call.ended:
                self.write(w.rst_stream(call.id, w.CANCEL))
            call.cancelled()
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    # the connection's hooks ---------------------------------------------------------------
    def headers(self, sid: int, end_stream: bool, fields: dict[bytes, bytes]) -> None:
        call = self.streams.get(sid)
        if call is not None:  # trailers from the client: only their END_STREAM matters
            if end_stream:
                self._request_done(call)
            return
        if sid % 2 == 0:
            raise w.H2Error(w.PROTOCOL_ERROR, f"HEADERS on even stream {sid}")
        if sid <= self.last_peer_stream:
            return  # a stream already closed (reset or answered)
        self.last_peer_stream = sid
        if self._draining:
            self.write(w.rst_stream(sid, w.REFUSED_STREAM))
            return
        headers = {
            k.decode("utf-8", "replace"): v.decode("utf-8", "replace") for k, v in fields.items()
        }
        call = Call(self, sid, headers.get(":path", ""), headers)
        self.streams[sid] = call
        if headers.get(":method") != "POST" or not headers.get("content-type", "").startswith(
            "application/grpc"
        ):
            refusal = w.literal(":status", "415")
            self.write(w.frame(w.HEADERS, w.END_HEADERS | w.END_STREAM, sid, refusal))
            call.ended = True
            self.reset(call, w.NO_ERROR)
            return
        encoding = headers.get("grpc-encoding", "identity")
        if encoding != "identity":
            call.finish("UNIMPLEMENTED", f"grpc-encoding {encoding} is not supported")
            return
        timeout = headers.get("grpc-timeout")
        if timeout is not None:
            seconds = w.parse_timeout(timeout)
            if seconds is None:
                call.finish("INTERNAL", f"malformed grpc-timeout {timeout!r}")
                return
            call.set_deadline(self._loop, seconds)
        if end_stream:
            self._request_done(call)

    def received(self, call: Call, data: bytes, end_stream: bool, t_ns: int) -> None:
        del t_ns
        if call.message or call.ended:
            return  # answered already: its bytes only count for the windows
        call.body += data
        if len(call.body) > MAX_MESSAGE + 5:
            call.finish("RESOURCE_EXHAUSTED", f"Received message larger than max ({MAX_MESSAGE})")
            self.reset(call, w.CANCEL)
            return
        if end_stream:
            self._request_done(call)

    def stream_reset(self, sid: int, code: int) -> None:
        del code
        call = self.streams.pop(sid, None)
        if call is not None:
            self.unblock(call)
            call.cancelled()

    def goaway_received(self, last_id: int, code: int, debug: bytes) -> None:
        del last_id, code, debug
        self._draining = True
        if not self.streams and self.transport is not None:
            self.transport.close()

    def drained(self, call: Call) -> bytes:
        trailers, call.trailers = call.trailers, None
        if trailers is None:
            return b""
        self._closed(call)
        return trailers

    # bookkeeping -------------------------------------------------------------------------
    def _request_done(self, call: Call) -> None:
        """The client half-closed: one length-prefixed message, then the handler."""
        if call.ended:
            return
        body = call.body
        if len(body) < 5 or int.from_bytes(body[1:5], "big") != len(body) - 5:
            call.finish("INTERNAL", "the request is not one length-prefixed message")
            return
        if body[0]:
            call.finish("UNIMPLEMENTED", "compressed messages are not supported")
            return
        call.message, call.body = body[5:], b""
        self._door.handler(call)

    def _closed(self, call: Call) -> None:
        self.streams.pop(call.id, None)
        self.unblock(call)
        call.cancelled()  # only clears the deadline: the call has ended
        if self._draining and not self.streams and self.transport is not None:
            self.transport.close()


async def serve(
    handler: Callable[[Call], None], host: str, port: int
) -> tuple[asyncio.Server, Door]:
    """Listen on ``host:port`` (0: a free port); the server and its door."""
    door = Door(handler)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: H2ServerConnection(door), host, port, reuse_address=True
    )
    return server, door
