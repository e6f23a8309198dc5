"""A lean cleartext HTTP/2 server for unary-request gRPC calls, on ``asyncio.Protocol``.

The simulator's gRPC door (TGIS's ``fmaas.GenerationService``). Like its HTTP/1.1 server
(:mod:`testbed.servers.sim.http`), it must never be what limits a load test, and it writes
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
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from testbed.core import h2_wire as w
from testbed.servers.sim.h2_call import Call

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
        self.connections: set[H2Connection] = set()
        #: True once the server stops: a connection made from then on is reset at once.
        self.closing = False


class H2Connection(asyncio.Protocol):
    """One client connection; every complete request goes to the door's handler."""

    def __init__(self, door: Door) -> None:
        from hpack import Decoder  # the tgis extra

        self._door = door
        self._decoder = Decoder()
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        self._buf = b""
        self._preface = True  # the client's preface not read yet
        self._calls: dict[int, Call] = {}
        self._last_id = 0
        self._block: tuple[int, int, bytearray] | None = None  # a header block, so far
        self._max_frame = w.DEFAULT_FRAME  # the client's
        self.peer_window = w.DEFAULT_WINDOW  # the client's initial stream window
        self._send_window = w.DEFAULT_WINDOW  # the connection's, for what this server sends
        self._unacked = 0
        self._blocked: list[Call] = []
        self._draining = False  # GOAWAY sent or received: no new calls
        door.connections.add(self)

    # asyncio.Protocol -------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        if self._door.closing:
            transport.abort()  # accepted while the server stopped; connection_lost follows
            return
        ours = {w.INITIAL_WINDOW_SIZE: STREAM_WINDOW, w.MAX_HEADER_LIST_SIZE: 16 * 1024}
        grow = w.window_update(0, CONNECTION_WINDOW - w.DEFAULT_WINDOW)
        transport.write(w.settings(ours) + grow)

    def connection_lost(self, exc: Exception | None) -> None:
        self._door.connections.discard(self)
        self._transport = None
        calls, self._calls = list(self._calls.values()), {}
        for call in calls:
            call.cancelled()

    def data_received(self, data: bytes) -> None:
        buf = self._buf + data if self._buf else data
        pos, size = 0, len(buf)
        try:
            if self._preface:
                if size < len(w.PREFACE):
                    if not w.PREFACE.startswith(buf):
                        raise w.H2Error(w.PROTOCOL_ERROR, "not an HTTP/2 preface")
                    self._buf = buf
                    return
                if not buf.startswith(w.PREFACE):
                    raise w.H2Error(w.PROTOCOL_ERROR, "not an HTTP/2 preface")
                self._preface = False
                pos = len(w.PREFACE)
            while size - pos >= 9:
                length = (buf[pos] << 16) | (buf[pos + 1] << 8) | buf[pos + 2]
                if length > w.DEFAULT_FRAME:  # our SETTINGS keep the default
                    raise w.H2Error(w.FRAME_SIZE_ERROR, f"{length}-byte frame")
                end = pos + 9 + length
                if end > size:
                    break
                kind, flags = buf[pos + 3], buf[pos + 4]
                sid = int.from_bytes(buf[pos + 5 : pos + 9], "big") & 0x7FFFFFFF
                self._frame(kind, flags, sid, buf[pos + 9 : end])
                pos = end
        except w.H2Error as exc:
            self._abort(exc.code, str(exc))
            return
        self._buf = buf[pos:] if pos < size else b""
        if self._unacked >= CONNECTION_WINDOW // 2:
            self._write(w.window_update(0, self._unacked))
            self._unacked = 0

    # writing, for the calls -------------------------------------------------------------
    def write_data(self, call: Call, messages: bytes) -> None:
        head = b""
        if not call.headers_sent:
            call.headers_sent = True
            head = w.frame(w.HEADERS, w.END_HEADERS, call.id, w.RESPONSE_BLOCK)
        if call.pending:
            call.pending += messages
            self._write(head)
            return
        size = len(messages)
        if size <= self._max_frame and size <= call.window and size <= self._send_window:
            call.window -= size
            self._send_window -= size
            self._write(head + w.frame(w.DATA, 0, call.id, messages))
        else:
            call.pending = messages
            self._blocked.append(call)
            self._write(head + self._take(call))

    def write_trailers(self, call: Call, block: bytes) -> None:
        if not call.headers_sent:  # Trailers-Only
            call.headers_sent = True
            block = w.RESPONSE_BLOCK + block
        trailers = w.header_frames(call.id, block, self._max_frame, end_stream=True)
        if call.pending:
            call.trailers = trailers  # after the DATA still waiting for a window
        else:
            self._write(trailers)
            self._closed(call)

    def reset(self, call: Call, code: int) -> None:
        """RST_STREAM for ``call`` (after its trailers: the client stops sending)."""
        if self._calls.pop(call.id, None) is not None:
            call.pending, call.trailers = b"", None
        self._write(w.rst_stream(call.id, code))

    def goaway(self) -> None:
        """Stop: GOAWAY (the calls already read are cancelled, none is taken after), close."""
        self._draining = True
        self._write(w.goaway(self._last_id, w.NO_ERROR))
        calls, self._calls = list(self._calls.values()), {}
        for call in calls:
            if not call.ended:
                self._write(w.rst_stream(call.id, w.CANCEL))
            call.cancelled()
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    # reading ----------------------------------------------------------------------------
    def _frame(self, kind: int, flags: int, sid: int, payload: bytes) -> None:
        if self._block is not None and (kind != w.CONTINUATION or sid != self._block[0]):
            raise w.H2Error(w.PROTOCOL_ERROR, "a header block interrupted")
        if kind == w.DATA:
            self._data(sid, flags, payload)
        elif kind in (w.HEADERS, w.CONTINUATION):
            self._header_frame(kind, flags, sid, payload)
        else:
            self._control(kind, flags, sid, payload)

    def _header_frame(self, kind: int, flags: int, sid: int, payload: bytes) -> None:
        if kind == w.HEADERS:
            if sid % 2 == 0:
                raise w.H2Error(w.PROTOCOL_ERROR, f"HEADERS on even stream {sid}")
            self._block = (sid, flags, bytearray(w.header_fragment(flags, payload)))
        elif self._block is None:
            raise w.H2Error(w.PROTOCOL_ERROR, "CONTINUATION without HEADERS")
        else:
            w.continue_block(self._block[2], payload)
        if flags & w.END_HEADERS:
            self._headers_done()

    def _control(self, kind: int, flags: int, sid: int, payload: bytes) -> None:
        if kind == w.SETTINGS:
            if not flags & w.ACK:
                self._settings(sid, payload)
        elif kind == w.PING:
            if not flags & w.ACK:
                self._write(w.frame(w.PING, w.ACK, 0, payload))
        elif kind == w.WINDOW_UPDATE:
            self._window_update(sid, int.from_bytes(payload[:4], "big") & 0x7FFFFFFF)
        elif kind == w.RST_STREAM:
            call = self._calls.pop(sid, None)
            if call is not None:
                call.cancelled()
        elif kind == w.GOAWAY:
            self._draining = True
            if not self._calls and self._transport is not None:
                self._transport.close()
        elif kind == w.PUSH_PROMISE:
            raise w.H2Error(w.PROTOCOL_ERROR, "PUSH_PROMISE from a client")
        # PRIORITY and unknown frame types are ignored (RFC 9113 §4.1, §5.5)

    def _headers_done(self) -> None:
        assert self._block is not None
        sid, flags, block = self._block
        self._block = None
        try:  # every block: the decoder's table must follow the client's encoder
            fields = self._decoder.decode(bytes(block))
        except Exception as exc:
            raise w.H2Error(w.COMPRESSION_ERROR, f"bad header block: {exc}") from exc
        call = self._calls.get(sid)
        if call is not None:  # trailers from the client: only their END_STREAM matters
            if flags & w.END_STREAM:
                self._request_done(call)
            return
        if sid <= self._last_id:
            return  # a stream already closed (reset or answered)
        self._last_id = sid
        if self._draining:
            self._write(w.rst_stream(sid, w.REFUSED_STREAM))
            return
        headers = {str(k): str(v) for k, v in fields}
        call = Call(self, sid, headers.get(":path", ""), headers)
        self._calls[sid] = call
        if headers.get(":method") != "POST" or not headers.get("content-type", "").startswith(
            "application/grpc"
        ):
            refusal = w.literal(":status", "415")
            self._write(w.frame(w.HEADERS, w.END_HEADERS | w.END_STREAM, sid, refusal))
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
        if flags & w.END_STREAM:
            self._request_done(call)

    def _data(self, sid: int, flags: int, payload: bytes) -> None:
        if sid == 0:
            raise w.H2Error(w.PROTOCOL_ERROR, "DATA on stream 0")
        self._unacked += len(payload)
        call = self._calls.get(sid)
        if call is None or call.message or call.ended:
            return  # a stream reset or answered: its bytes still count for the connection
        if flags & w.PADDED:
            payload = w.unpad(payload)
        call.body += payload
        call.unacked += len(payload)
        if len(call.body) > MAX_MESSAGE + 5:
            call.finish("RESOURCE_EXHAUSTED", f"Received message larger than max ({MAX_MESSAGE})")
            self.reset(call, w.CANCEL)
            return
        if flags & w.END_STREAM:
            self._request_done(call)
        elif call.unacked >= STREAM_WINDOW // 2:
            self._write(w.window_update(sid, call.unacked))
            call.unacked = 0

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

    def _settings(self, sid: int, payload: bytes) -> None:
        if sid:
            raise w.H2Error(w.PROTOCOL_ERROR, f"SETTINGS on stream {sid}")
        for key, value in w.settings_values(payload):
            if key == w.INITIAL_WINDOW_SIZE:
                for call in self._calls.values():
                    call.window += value - self.peer_window
                self.peer_window = value
            elif key == w.MAX_FRAME_SIZE:
                self._max_frame = value
        self._write(w.frame(w.SETTINGS, w.ACK, 0))
        self._flush()

    def _window_update(self, sid: int, increment: int) -> None:
        if sid == 0:
            if increment == 0:
                raise w.H2Error(w.PROTOCOL_ERROR, "WINDOW_UPDATE of 0")
            self._send_window += increment
        elif (call := self._calls.get(sid)) is not None:
            call.window += increment
        self._flush()

    # bookkeeping -------------------------------------------------------------------------
    def _take(self, call: Call) -> bytes:
        """As much of ``call``'s pending DATA as the windows allow, as frames (and its
        trailers once nothing is left)."""
        window = min(call.window, self._send_window)
        frames, sent = w.data_frames(
            call.id, call.pending, window, self._max_frame, end_stream=False
        )
        call.pending = call.pending[sent:]
        call.window -= sent
        self._send_window -= sent
        out = [frames]
        if not call.pending and call.trailers is not None:
            out.append(call.trailers)
            call.trailers = None
            self._closed(call)
        return b"".join(out)

    def _flush(self) -> None:
        if not self._blocked:
            return
        blocked, self._blocked = self._blocked, []
        out = []
        for call in blocked:
            if call.id in self._calls:
                out.append(self._take(call))
                if call.pending:
                    self._blocked.append(call)
        self._write(b"".join(out))

    def _closed(self, call: Call) -> None:
        self._calls.pop(call.id, None)
        if call in self._blocked:
            self._blocked.remove(call)
        call.cancelled()  # only clears the deadline: the call has ended
        if self._draining and not self._calls and self._transport is not None:
            self._transport.close()

    def _write(self, data: bytes) -> None:
        if data and self._transport is not None:
            self._transport.write(data)

    def _abort(self, code: int, reason: str) -> None:
        """A connection error (RFC 9113 §5.4.1): GOAWAY with the reason, close."""
        self._write(w.goaway(self._last_id, code, reason.encode()[:200]))
        if self._transport is not None:
            self._transport.close()


async def serve(
    handler: Callable[[Call], None], host: str, port: int
) -> tuple[asyncio.Server, Door]:
    """Listen on ``host:port`` (0: a free port); the server and its door."""
    door = Door(handler)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: H2Connection(door), host, port, reuse_address=True)
    return server, door
