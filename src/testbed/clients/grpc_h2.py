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
What every HTTP/2 connection does — framing, header blocks, SETTINGS, PING, flow control —
is :class:`~testbed.wire.h2_connection.H2Connection`'s, shared with the simulator's server;
this module adds the client's role. A call's messages are cut out of its DATA by
:class:`~testbed.clients.grpc_stream.Stream`; calls and reconnection are
:mod:`testbed.clients.grpc_channel`'s.
"""

from __future__ import annotations

import asyncio
from collections import deque

from testbed.clients.grpc_stream import GrpcError, OnMessage, Stream
from testbed.wire import h2 as w
from testbed.wire.h2_connection import H2Connection

#: The windows this client opens (bytes): large, so that WINDOW_UPDATEs are rare.
STREAM_WINDOW = 1 << 24
CONNECTION_WINDOW = 1 << 30
_NO_LIMIT = 1 << 31


class GrpcConnection(H2Connection[Stream]):
    """One HTTP/2 connection, many concurrent calls (odd stream ids)."""

    STREAM_WINDOW = STREAM_WINDOW
    CONNECTION_WINDOW = CONNECTION_WINDOW
    DATA_ENDS_STREAM = True  # a call sends one request message, then half-closes

    def __init__(self) -> None:
        super().__init__()
        loop = asyncio.get_running_loop()
        self.ready: asyncio.Future[bool] = loop.create_future()  # the server's SETTINGS came
        self.lost: asyncio.Future[None] = loop.create_future()
        self.closed = False
        self.draining = False  # GOAWAY received (or ids used up): no new calls here
        self.goaway_reason = ""
        self._loop = loop
        self._next_id = 1
        self._max_streams = _NO_LIMIT
        self._slot_waiters: deque[asyncio.Future[None]] = deque()

    # asyncio.Protocol -------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        ours = {w.ENABLE_PUSH: 0, w.INITIAL_WINDOW_SIZE: STREAM_WINDOW}
        grow = w.window_update(0, CONNECTION_WINDOW - w.DEFAULT_WINDOW)
        self.write(w.PREFACE + w.settings(ours) + grow)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = self.draining = True
        reason = self.goaway_reason or f"the connection closed{f': {exc}' if exc else ''}"
        for stream in list(self.streams.values()):
            self._fail(stream, GrpcError("UNAVAILABLE", reason, answered=False))
        if not self.ready.done():
            self.ready.set_result(False)
        if not self.lost.done():
            self.lost.set_result(None)
        self._wake_all()

    # calls ------------------------------------------------------------------------------
    @property
    def usable(self) -> bool:
        return not self.draining and self.ready.done() and self.ready.result()

    @property
    def open_streams(self) -> int:
        return len(self.streams)

    def has_slot(self) -> bool:
        return len(self.streams) < self._max_streams

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
        stream.window = self.peer_window
        self.streams[sid] = stream
        head = w.header_frames(sid, block, self.max_frame, end_stream=False)
        self.send_data(stream, w.length_prefixed(message), head)
        return stream

    def reset(self, stream: Stream) -> None:
        """Cancel ``stream`` (its caller gave up): RST_STREAM, its slot freed."""
        if self.streams.pop(stream.id, None) is not None:
            self._send_reset(stream.id)
            self._released()

    def close(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.write(w.goaway(0, w.NO_ERROR))
            self.transport.close()

    # the connection's hooks ---------------------------------------------------------------
    def received(self, stream: Stream, data: bytes, end_stream: bool, t_ns: int) -> None:
        if data:
            try:
                stream.feed(data, t_ns)
            except GrpcError as exc:  # this call only: the connection goes on
                self._fail(stream, exc)
                self._send_reset(stream.id)
        if end_stream and stream.id in self.streams:
            self._end(stream, {})

    def headers(self, sid: int, end_stream: bool, fields: dict[bytes, bytes]) -> None:
        stream = self.streams.get(sid)
        if stream is None:
            return
        if not stream.got_head:
            stream.got_head = True
            status = fields.get(b":status", b"").decode("latin-1")
            if status != "200" and b"grpc-status" not in fields:
                code = w.HTTP_TO_GRPC.get(int(status) if status.isdigit() else 0, "UNKNOWN")
                self._fail(stream, GrpcError(code, f"HTTP status {status} without a gRPC status"))
                self._send_reset(stream.id)
                return
        if end_stream:
            self._end(stream, fields)

    def setting(self, key: int, value: int) -> None:
        if key == w.MAX_CONCURRENT_STREAMS:
            self._max_streams = value

    def settled(self) -> None:
        if not self.ready.done():
            self.ready.set_result(True)
        self._wake_all()

    def stream_reset(self, sid: int, code: int) -> None:
        stream = self.streams.get(sid)
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

    def goaway_received(self, last_id: int, code: int, debug: bytes) -> None:
        self.draining = True
        said = f": {debug.decode('utf-8', 'replace')}" if debug else ""
        self.goaway_reason = f"the server closed the connection (GOAWAY {w.error_name(code)}{said})"
        for stream in [s for sid, s in self.streams.items() if sid > last_id]:
            why = f"{self.goaway_reason} before handling the call"
            self._fail(stream, GrpcError("UNAVAILABLE", why, answered=False, retryable=True))
        self._wake_all()
        if not self.streams:
            self.close()

    def abort_connection(self, code: int, reason: str) -> None:
        """A connection error: every call fails with it (when the connection is lost)."""
        self.goaway_reason = f"HTTP/2 protocol error ({w.error_name(code)}): {reason}"
        super().abort_connection(code, reason)

    # bookkeeping -------------------------------------------------------------------------
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
                self.streams.pop(stream.id, None)
                self._released()
                if not stream.done.done():
                    stream.done.set_result(None)
                return
            error = GrpcError(code, w.grpc_message(trailers.get(b"grpc-message", b"")))
        self._fail(stream, error)

    def _send_reset(self, sid: int) -> None:
        if not self.closed:
            self.write(w.rst_stream(sid, w.CANCEL))

    def _fail(self, stream: Stream, error: GrpcError) -> None:
        if self.streams.pop(stream.id, None) is not None:
            self._released()
        if not stream.done.done():
            stream.done.set_exception(error)

    def _released(self) -> None:
        self._wake_one()
        if self.draining and not self.streams and not self.closed:
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
