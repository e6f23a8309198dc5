"""One cleartext HTTP/2 connection carrying gRPC calls, on the event loop (no threads).

:class:`GrpcConnection` is an ``asyncio.Protocol``: it frames what the server sends (DATA,
HEADERS and CONTINUATION with padding and priority, SETTINGS, PING, WINDOW_UPDATE,
RST_STREAM, GOAWAY), cuts each stream's DATA into gRPC length-prefixed messages (one split
across frames or several in one frame) and hands every message to the call's
``on_message(message, t_ns)`` with the monotonic time at which its last bytes were read.
A call's ``done`` future resolves at its trailers (``grpc-status`` 0) or fails with a
:class:`GrpcError`. Flow control: the client's SETTINGS open a 16 MiB stream window and a
1 GiB connection window; consumed bytes are given back in one WINDOW_UPDATE when half a
window is used, so a load test rarely sends any. What the client sends respects the
server's windows, frame size and ``MAX_CONCURRENT_STREAMS`` (a call waits for a slot).
A call's messages are cut out of its DATA by :class:`~testbed.clients.grpc_stream.Stream`;
calls and reconnection are :mod:`testbed.clients.grpc_channel`'s.
"""

from __future__ import annotations

import asyncio
from collections import deque

from testbed.clients.grpc_stream import GrpcError, OnMessage, Stream
from testbed.core import h2_wire as w
from testbed.core.clock import monotonic_ns

#: The windows this client opens (bytes): large, so that WINDOW_UPDATEs are rare.
STREAM_WINDOW = 1 << 24
CONNECTION_WINDOW = 1 << 30
_STREAM_REFILL = STREAM_WINDOW // 2  # a stream's window is given back when half used
_NO_LIMIT = 1 << 31


class GrpcConnection(asyncio.Protocol):
    """One HTTP/2 connection, many concurrent calls (odd stream ids)."""

    def __init__(self) -> None:
        from hpack import Decoder  # the tgis extra

        self.transport: asyncio.Transport | None = None
        loop = asyncio.get_running_loop()
        self.ready: asyncio.Future[bool] = loop.create_future()  # the server's SETTINGS came
        self.lost: asyncio.Future[None] = loop.create_future()
        self.closed = False
        self.draining = False  # GOAWAY received (or ids used up): no new calls here
        self.goaway_reason = ""
        self._loop = loop
        self._decoder = Decoder()
        self._streams: dict[int, Stream] = {}
        self._next_id = 1
        self._buf = b""
        self._max_streams = _NO_LIMIT
        self._max_frame = w.DEFAULT_FRAME
        self._peer_window = w.DEFAULT_WINDOW  # the server's initial stream window
        self._send_window = w.DEFAULT_WINDOW  # the connection's, for what we send
        self._unacked = 0
        self._blocked: list[Stream] = []
        self._slot_waiters: deque[asyncio.Future[None]] = deque()
        self._block: tuple[int, bool, bytearray] | None = None  # a header block, so far

    # asyncio.Protocol -------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        assert self.transport is not None
        ours = {w.ENABLE_PUSH: 0, w.INITIAL_WINDOW_SIZE: STREAM_WINDOW}
        grow = w.window_update(0, CONNECTION_WINDOW - w.DEFAULT_WINDOW)
        self.transport.write(w.PREFACE + w.settings(ours) + grow)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = self.draining = True
        reason = self.goaway_reason or f"the connection closed{f': {exc}' if exc else ''}"
        for stream in list(self._streams.values()):
            self._fail(stream, GrpcError("UNAVAILABLE", reason, answered=False))
        if not self.ready.done():
            self.ready.set_result(False)
        if not self.lost.done():
            self.lost.set_result(None)
        self._wake_all()

    def data_received(self, data: bytes) -> None:
        t_ns = monotonic_ns()
        buf = self._buf + data if self._buf else data
        pos, size = 0, len(buf)
        try:
            while size - pos >= 9:
                length = (buf[pos] << 16) | (buf[pos + 1] << 8) | buf[pos + 2]
                if length > w.DEFAULT_FRAME:  # our SETTINGS keep the default
                    raise w.H2Error(w.FRAME_SIZE_ERROR, f"{length}-byte frame")
                end = pos + 9 + length
                if end > size:
                    break
                kind, flags = buf[pos + 3], buf[pos + 4]
                sid = int.from_bytes(buf[pos + 5 : pos + 9], "big") & 0x7FFFFFFF
                if kind == w.DATA and self._block is None:
                    self._data(sid, flags, buf[pos + 9 : end], t_ns)
                else:
                    self._control(kind, flags, sid, buf[pos + 9 : end])
                pos = end
        except w.H2Error as exc:
            self._abort(exc.code, str(exc))
            return
        self._buf = buf[pos:] if pos < size else b""
        if self._unacked >= CONNECTION_WINDOW // 2 and self.transport is not None:
            self.transport.write(w.window_update(0, self._unacked))
            self._unacked = 0

    # calls ------------------------------------------------------------------------------
    @property
    def usable(self) -> bool:
        return not self.draining and self.ready.done() and self.ready.result()

    @property
    def open_streams(self) -> int:
        return len(self._streams)

    def has_slot(self) -> bool:
        return len(self._streams) < self._max_streams

    async def slot(self) -> None:
        """Wait until a stream closes (or the connection can take no more calls)."""
        future = self._loop.create_future()
        self._slot_waiters.append(future)
        try:
            await future
        except BaseException:
            if future.done() and not future.cancelled():
                self._wake_one()  # woken, then gave up: the freed slot goes to the next
            raise

    def open(self, block: bytes, message: bytes, on_message: OnMessage) -> Stream:
        """Start a call: ``block`` (HPACK), one request ``message``, half-closed."""
        assert self.transport is not None
        sid = self._next_id
        self._next_id += 2
        if self._next_id > w.MAX_WINDOW:
            self.draining = True
        stream = Stream(sid, on_message, self._loop.create_future())
        stream.send_window = self._peer_window
        self._streams[sid] = stream
        head = w.header_frames(sid, block, self._max_frame, end_stream=False)
        data = w.length_prefixed(message)
        if len(data) <= min(stream.send_window, self._send_window, self._max_frame):
            stream.send_window -= len(data)
            self._send_window -= len(data)
            self.transport.write(head + w.frame(w.DATA, w.END_STREAM, sid, data))
        else:
            self.transport.write(head)
            stream.pending = data
            self._blocked.append(stream)
            self._flush()
        return stream

    def reset(self, stream: Stream) -> None:
        """Cancel ``stream`` (its caller gave up): RST_STREAM, its slot freed."""
        if self._streams.pop(stream.id, None) is not None:
            if self.transport is not None and not self.closed:
                self.transport.write(w.rst_stream(stream.id, w.CANCEL))
            self._released()

    def close(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.write(w.goaway(0, w.NO_ERROR))
            self.transport.close()

    # receiving --------------------------------------------------------------------------
    def _data(self, sid: int, flags: int, payload: bytes, t_ns: int) -> None:
        self._unacked += len(payload)
        stream = self._streams.get(sid)
        if stream is None:
            if sid == 0:
                raise w.H2Error(w.PROTOCOL_ERROR, "DATA on stream 0")
            return  # a stream we reset: its bytes still count for the connection
        stream.unacked += len(payload)
        if flags & w.PADDED:
            payload = w.unpad(payload)
        if payload:
            self._messages(stream, payload, t_ns)
        if flags & w.END_STREAM:
            if sid in self._streams:
                self._end(stream, {})
        elif stream.unacked >= _STREAM_REFILL and sid in self._streams:
            assert self.transport is not None
            self.transport.write(w.window_update(sid, stream.unacked))
            stream.unacked = 0

    def _messages(self, stream: Stream, data: bytes, t_ns: int) -> None:
        try:
            stream.feed(data, t_ns)
        except GrpcError as exc:  # this call only: the connection goes on
            self._fail(stream, exc)
            self._send_reset(stream.id)

    def _control(self, kind: int, flags: int, sid: int, payload: bytes) -> None:
        if self._block is not None and (kind != w.CONTINUATION or sid != self._block[0]):
            raise w.H2Error(w.PROTOCOL_ERROR, "a header block interrupted")
        if kind in (w.HEADERS, w.CONTINUATION):
            self._header_frame(kind, flags, sid, payload)
        elif kind == w.SETTINGS:
            if not flags & w.ACK:
                self._settings(payload)
        elif kind == w.PING:
            if not flags & w.ACK and self.transport is not None:
                self.transport.write(w.frame(w.PING, w.ACK, 0, payload))
        elif kind == w.WINDOW_UPDATE:
            self._window_update(sid, int.from_bytes(payload[:4], "big") & 0x7FFFFFFF)
        elif kind == w.RST_STREAM:
            self._reset_by_server(sid, int.from_bytes(payload[:4], "big"))
        elif kind == w.GOAWAY:
            self._goaway(int.from_bytes(payload[:4], "big") & 0x7FFFFFFF, payload[4:8], payload[8:])
        elif kind == w.PUSH_PROMISE:
            raise w.H2Error(w.PROTOCOL_ERROR, "PUSH_PROMISE (push is disabled)")
        # PRIORITY and unknown frame types are ignored (RFC 9113 §4.1, §5.5)

    def _header_frame(self, kind: int, flags: int, sid: int, payload: bytes) -> None:
        if kind == w.HEADERS:
            fragment = bytearray(w.header_fragment(flags, payload))
            self._block = (sid, bool(flags & w.END_STREAM), fragment)
        elif self._block is None:
            raise w.H2Error(w.PROTOCOL_ERROR, "CONTINUATION without HEADERS")
        else:
            w.continue_block(self._block[2], payload)
        if flags & w.END_HEADERS:
            self._headers_done()

    def _headers_done(self) -> None:
        assert self._block is not None
        sid, end_stream, block = self._block
        self._block = None
        try:  # every block, even a dropped stream's: the decoder's table must follow
            headers = dict(self._decoder.decode(bytes(block), raw=True))
        except Exception as exc:
            raise w.H2Error(w.COMPRESSION_ERROR, f"bad header block: {exc}") from exc
        stream = self._streams.get(sid)
        if stream is None:
            return
        if not stream.got_head:
            stream.got_head = True
            status = headers.get(b":status", b"").decode("latin-1")
            if status != "200" and b"grpc-status" not in headers:
                code = w.HTTP_TO_GRPC.get(int(status) if status.isdigit() else 0, "UNKNOWN")
                self._fail(stream, GrpcError(code, f"HTTP status {status} without a gRPC status"))
                self._send_reset(stream.id)
                return
        if end_stream:
            self._end(stream, headers)

    def _end(self, stream: Stream, trailers: dict[bytes, bytes]) -> None:
        """The server ended the stream; ``trailers`` carry its status."""
        status = trailers.get(b"grpc-status")
        if status is None:
            error = GrpcError("INTERNAL", "the stream ended without a grpc-status")
        elif stream.have:
            error = GrpcError("INTERNAL", f"the stream ended inside a message ({stream.have} B)")
        else:
            code = w.grpc_code(status)
            if code == "OK":
                self._streams.pop(stream.id, None)
                self._released()
                if not stream.done.done():
                    stream.done.set_result(None)
                return
            error = GrpcError(code, w.grpc_message(trailers.get(b"grpc-message", b"")))
        self._fail(stream, error)

    def _settings(self, payload: bytes) -> None:
        for key, value in w.settings_values(payload):
            if key == w.MAX_CONCURRENT_STREAMS:
                self._max_streams = value
            elif key == w.INITIAL_WINDOW_SIZE:
                for stream in self._streams.values():
                    stream.send_window += value - self._peer_window
                self._peer_window = value
            elif key == w.MAX_FRAME_SIZE:
                self._max_frame = value
        assert self.transport is not None
        self.transport.write(w.frame(w.SETTINGS, w.ACK, 0))
        if not self.ready.done():
            self.ready.set_result(True)
        self._flush()
        self._wake_all()

    def _window_update(self, sid: int, increment: int) -> None:
        if sid == 0:
            if increment == 0:
                raise w.H2Error(w.PROTOCOL_ERROR, "WINDOW_UPDATE of 0")
            self._send_window += increment
        elif (stream := self._streams.get(sid)) is not None:
            stream.send_window += increment
        self._flush()

    def _reset_by_server(self, sid: int, code: int) -> None:
        stream = self._streams.get(sid)
        if stream is not None:
            status = w.RESET_TO_GRPC.get(code, "INTERNAL")
            refused = code == w.REFUSED_STREAM
            error = GrpcError(
                status,
                f"the server reset the stream ({w.error_name(code)})",
                answered=not refused,
                retryable=refused and not stream.messages,
            )
            self._fail(stream, error)

    def _goaway(self, last_id: int, code: bytes, debug: bytes) -> None:
        self.draining = True
        name = w.error_name(int.from_bytes(code, "big"))
        said = f": {debug.decode('utf-8', 'replace')}" if debug else ""
        self.goaway_reason = f"the server closed the connection (GOAWAY {name}{said})"
        for stream in [s for sid, s in self._streams.items() if sid > last_id]:
            why = f"{self.goaway_reason} before handling the call"
            self._fail(stream, GrpcError("UNAVAILABLE", why, answered=False, retryable=True))
        self._wake_all()
        if not self._streams:
            self.close()

    # bookkeeping -------------------------------------------------------------------------
    def _send_reset(self, sid: int) -> None:
        if self.transport is not None and not self.closed:
            self.transport.write(w.rst_stream(sid, w.CANCEL))

    def _fail(self, stream: Stream, error: GrpcError) -> None:
        if self._streams.pop(stream.id, None) is not None:
            self._released()
        if not stream.done.done():
            stream.done.set_exception(error)

    def _released(self) -> None:
        self._wake_one()
        if self.draining and not self._streams and not self.closed:
            self.close()

    def _wake_one(self) -> None:
        while self._slot_waiters:
            waiter = self._slot_waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _wake_all(self) -> None:
        while self._slot_waiters:
            waiter = self._slot_waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    def _flush(self) -> None:
        """Send request DATA that waited for the server's windows."""
        still: list[Stream] = []
        for stream in self._blocked:
            if stream.id not in self._streams:
                continue
            window = min(stream.send_window, self._send_window)
            frames, sent = w.data_frames(
                stream.id, stream.pending, window, self._max_frame, end_stream=True
            )
            if sent:
                stream.pending = stream.pending[sent:]
                stream.send_window -= sent
                self._send_window -= sent
                assert self.transport is not None
                self.transport.write(frames)
            if stream.pending:
                still.append(stream)
        self._blocked = still

    def _abort(self, code: int, reason: str) -> None:
        """A connection error (RFC 9113 §5.4.1): GOAWAY, close, fail every call."""
        self.goaway_reason = f"HTTP/2 protocol error ({w.error_name(code)}): {reason}"
        if self.transport is not None and not self.closed:
            self.transport.write(w.goaway(0, code))  # no stream of the server's taken
            self.transport.abort()
