"""One HTTP/2 connection state machine (RFC 9113), for either side, on ``asyncio.Protocol``.

What both sides of a connection do alike lives here once: reading frames (the length check
against the default frame size our SETTINGS keep), the client's preface on the server's
side, header blocks across HEADERS and CONTINUATION (padding and priority stripped; nothing
may interrupt a block; every block decoded by the ``hpack`` package's stateful decoder, even
a dropped stream's, so that its table follows the peer's encoder), SETTINGS (the peer's
initial stream window applied to open streams, its frame size) and their ACK, PING, flow
control both ways — what is read is given back in one WINDOW_UPDATE when half a window is
used; what is sent waits for the peer's windows and leaves as they open — and a connection
error answered with GOAWAY (§5.4.1).

A role subclasses :class:`H2Connection` and adds what differs: the client
(``clients.grpc_h2.GrpcConnection``) opens odd streams and reads answers; the simulator's
server (``servers.sim.h2.H2ServerConnection``) takes requests and writes answers. The hooks:
:meth:`~H2Connection.received` (a stream's DATA), :meth:`~H2Connection.headers` (a decoded
block), :meth:`~H2Connection.stream_reset`, :meth:`~H2Connection.goaway_received`,
:meth:`~H2Connection.setting` and :meth:`~H2Connection.settled` (the peer's SETTINGS),
:meth:`~H2Connection.drained` (a stream's pending DATA all sent). DATA is the hot path of a
stream of tokens: a frame costs one call into the role.
"""

from __future__ import annotations

import asyncio
from typing import Generic, Protocol, TypeVar

from testbed.core.clock import monotonic_ns
from testbed.wire import h2 as w


class FlowStream(Protocol):
    """What the connection keeps of each stream for flow control (a role's stream class)."""

    id: int
    window: int  # what the peer lets this side send on the stream
    pending: bytes  # DATA waiting for the peer's windows
    unacked: int  # bytes read, not yet given back by a WINDOW_UPDATE


S = TypeVar("S", bound=FlowStream)


class H2Connection(asyncio.Protocol, Generic[S]):
    """The state both sides of one HTTP/2 connection keep, and the frames they read alike."""

    #: The windows this side opens for what the peer sends (a role sets its own).
    STREAM_WINDOW = w.DEFAULT_WINDOW
    CONNECTION_WINDOW = w.DEFAULT_WINDOW
    #: Whether the DATA this side sends ends its stream (a client's one request message).
    DATA_ENDS_STREAM = False
    #: Whether the peer opens with the client's connection preface (this side serves).
    SERVES = False

    def __init__(self) -> None:
        from hpack import Decoder  # the tgis extra

        self.transport: asyncio.Transport | None = None
        self.streams: dict[int, S] = {}
        self.max_frame = w.DEFAULT_FRAME  # the peer's
        self.peer_window = w.DEFAULT_WINDOW  # the peer's initial stream window
        self.send_window = w.DEFAULT_WINDOW  # the connection's, for what this side sends
        self.last_peer_stream = 0  # the highest stream id the peer opened (a server's GOAWAY)
        self._decoder = Decoder()
        self._buf = b""
        self._preface = self.SERVES  # the client's preface not read yet
        self._block: tuple[int, int, bytearray] | None = None  # a header block, so far
        self._unacked = 0
        self._blocked: list[S] = []

    # -- reading ---------------------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        t_ns = monotonic_ns()
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
                if kind == w.DATA and self._block is None:
                    self._data(sid, flags, buf[pos + 9 : end], t_ns)
                else:
                    self._control(kind, flags, sid, buf[pos + 9 : end])
                pos = end
        except w.H2Error as exc:
            self.abort_connection(exc.code, str(exc))
            return
        self._buf = buf[pos:] if pos < size else b""
        if self._unacked >= self.CONNECTION_WINDOW // 2:
            self.write(w.window_update(0, self._unacked))
            self._unacked = 0

    def _data(self, sid: int, flags: int, payload: bytes, t_ns: int) -> None:
        if sid == 0:
            raise w.H2Error(w.PROTOCOL_ERROR, "DATA on stream 0")
        self._unacked += len(payload)  # padding included (§6.9.1)
        stream = self.streams.get(sid)
        if stream is None:
            return  # a stream closed or reset: its bytes still count for the connection
        stream.unacked += len(payload)
        end_stream = bool(flags & w.END_STREAM)
        self.received(stream, w.unpad(payload) if flags & w.PADDED else payload, end_stream, t_ns)
        if not end_stream and stream.unacked >= self.STREAM_WINDOW // 2 and sid in self.streams:
            self.write(w.window_update(sid, stream.unacked))
            stream.unacked = 0

    def _control(self, kind: int, flags: int, sid: int, payload: bytes) -> None:
        if self._block is not None and (kind != w.CONTINUATION or sid != self._block[0]):
            raise w.H2Error(w.PROTOCOL_ERROR, "a header block interrupted")
        if kind in (w.HEADERS, w.CONTINUATION):
            self._header_frame(kind, flags, sid, payload)
        elif kind == w.SETTINGS:
            if sid:
                raise w.H2Error(w.PROTOCOL_ERROR, f"SETTINGS on stream {sid}")
            if not flags & w.ACK:
                self._settings(payload)
        elif kind == w.PING:
            if not flags & w.ACK:
                self.write(w.frame(w.PING, w.ACK, 0, payload))
        elif kind == w.WINDOW_UPDATE:
            self._window_update(sid, int.from_bytes(payload[:4], "big") & 0x7FFFFFFF)
        elif kind == w.RST_STREAM:
            self.stream_reset(sid, int.from_bytes(payload[:4], "big"))
        elif kind == w.GOAWAY:
            last_id = int.from_bytes(payload[:4], "big") & 0x7FFFFFFF
            self.goaway_received(last_id, int.from_bytes(payload[4:8], "big"), payload[8:])
        elif kind == w.PUSH_PROMISE:
            raise w.H2Error(w.PROTOCOL_ERROR, "PUSH_PROMISE (push is disabled)")
        # PRIORITY and unknown frame types are ignored (RFC 9113 §4.1, §5.5)

    def _header_frame(self, kind: int, flags: int, sid: int, payload: bytes) -> None:
        if kind == w.HEADERS:
            self._block = (sid, flags, bytearray(w.header_fragment(flags, payload)))
        elif self._block is None:
            raise w.H2Error(w.PROTOCOL_ERROR, "CONTINUATION without HEADERS")
        else:
            w.continue_block(self._block[2], payload)
        if flags & w.END_HEADERS:
            sid, first_flags, block = self._block
            self._block = None
            try:  # every block, even a dropped stream's: the decoder's table must follow
                fields = self._decoder.decode(bytes(block), raw=True)
            except Exception as exc:
                raise w.H2Error(w.COMPRESSION_ERROR, f"bad header block: {exc}") from exc
            self.headers(sid, bool(first_flags & w.END_STREAM), dict(fields))

    def _settings(self, payload: bytes) -> None:
        for key, value in w.settings_values(payload):
            if key == w.INITIAL_WINDOW_SIZE:
                for stream in self.streams.values():
                    stream.window += value - self.peer_window
                self.peer_window = value
            elif key == w.MAX_FRAME_SIZE:
                self.max_frame = value
            else:
                self.setting(key, value)
        self.write(w.frame(w.SETTINGS, w.ACK, 0))
        self.settled()
        self.flush()

    def _window_update(self, sid: int, increment: int) -> None:
        if sid == 0:
            if increment == 0:
                raise w.H2Error(w.PROTOCOL_ERROR, "WINDOW_UPDATE of 0")
            self.send_window += increment
        elif (stream := self.streams.get(sid)) is not None:
            stream.window += increment
        self.flush()

    # -- the role's hooks ------------------------------------------------------------------
    def received(self, stream: S, data: bytes, end_stream: bool, t_ns: int) -> None:
        """DATA of an open ``stream`` (padding removed), read at ``t_ns``."""
        raise NotImplementedError

    def headers(self, sid: int, end_stream: bool, fields: dict[bytes, bytes]) -> None:
        """A complete header block on stream ``sid`` (open or not)."""
        raise NotImplementedError

    def stream_reset(self, sid: int, code: int) -> None:
        """The peer reset stream ``sid`` with error ``code``."""
        raise NotImplementedError

    def goaway_received(self, last_id: int, code: int, debug: bytes) -> None:
        """The peer is going away; streams above ``last_id`` were not processed."""
        raise NotImplementedError

    def setting(self, key: int, value: int) -> None:
        """A setting of the peer's that the connection itself does not apply."""

    def settled(self) -> None:
        """The peer's SETTINGS were applied and acknowledged."""

    def drained(self, stream: S) -> bytes:
        """What follows ``stream``'s last pending DATA once it is sent (a server's trailers)."""
        del stream
        return b""

    # -- writing ---------------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        if data and self.transport is not None:
            self.transport.write(data)

    def send_data(self, stream: S, data: bytes, head: bytes = b"") -> None:
        """``head`` (frames already due, e.g. the stream's HEADERS), then ``data`` as DATA
        now, or as the peer's windows open."""
        if stream.pending:
            stream.pending += data
            self.write(head)
            return
        size = len(data)
        if size <= self.max_frame and size <= stream.window and size <= self.send_window:
            stream.window -= size
            self.send_window -= size
            flags = w.END_STREAM if self.DATA_ENDS_STREAM else 0
            self.write(head + w.frame(w.DATA, flags, stream.id, data))
        else:
            stream.pending = data
            self._blocked.append(stream)
            self.write(head + self._take(stream))

    def _take(self, stream: S) -> bytes:
        """As much of ``stream``'s pending DATA as the windows allow, as frames (and what
        :meth:`drained` adds once nothing is left)."""
        window = min(stream.window, self.send_window)
        frames, sent = w.data_frames(
            stream.id, stream.pending, window, self.max_frame, end_stream=self.DATA_ENDS_STREAM
        )
        stream.pending = stream.pending[sent:]
        stream.window -= sent
        self.send_window -= sent
        if stream.pending:
            return frames
        return frames + self.drained(stream)

    def flush(self) -> None:
        """Send the DATA that waited for the peer's windows."""
        if not self._blocked:
            return
        blocked, self._blocked = self._blocked, []
        out = []
        for stream in blocked:
            if stream.pending and self.streams.get(stream.id) is stream:
                out.append(self._take(stream))
                if stream.pending:
                    self._blocked.append(stream)
        self.write(b"".join(out))

    def unblock(self, stream: S) -> None:
        """Forget ``stream``'s DATA still waiting (it was reset or ended)."""
        stream.pending = b""
        if stream in self._blocked:
            self._blocked.remove(stream)

    def abort_connection(self, code: int, reason: str) -> None:
        """A connection error (RFC 9113 §5.4.1): GOAWAY with the reason, then close."""
        self.write(w.goaway(self.last_peer_stream, code, reason.encode()[:200]))
        if self.transport is not None:
            self.transport.close()
