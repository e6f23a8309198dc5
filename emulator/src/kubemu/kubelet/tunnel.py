"""``kubectl port-forward``: the ``portforward.k8s.io`` protocol over SPDY in a websocket.

kubectl (1.31+) asks for the subprotocol ``SPDY/3.1+portforward.k8s.io`` and names no port
in the URL. For each local connection it opens two SPDY streams whose headers carry
``streamType`` (``error`` then ``data``), ``port`` and ``requestID``; the kubelet replies to
each, connects the pair to the container port, and relays bytes. When the pod's side of the
connection ends, the data stream and then the error stream are closed (FIN); a connection
that cannot be made is a message on the error stream, as the real kubelet words it. A FIN
from kubectl half-closes the pod's side; RST_STREAM or the websocket's end closes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import Mapping
from dataclasses import dataclass

from aiohttp import WSMsgType, web

from kubemu.kubelet.spdy import (
    GOAWAY,
    MAX_DATA,
    PING,
    RST_STREAM,
    SYN_STREAM,
    Frame,
    HeaderCodec,
    control_frame,
    data_frame,
    take_frame,
)

PROTOCOL = "SPDY/3.1+portforward.k8s.io"
#: RST_STREAM status codes (SPDY/3 section 2.6.3).
PROTOCOL_ERROR = 1


def forward_error(port: int, uid: str, exc: OSError, note: str = "") -> str:
    """The kubelet's message when the container port does not answer (and the emulator's
    ``note`` on why, when it knows)."""
    return (
        f"error forwarding port {port} to pod {uid}, uid : failed to execute portforward in"
        f" network namespace: failed to connect to localhost:{port} inside namespace {uid}:"
        f" {exc}" + (f" ({note})" if note else "")
    )


@dataclass
class _Connection:
    """One forwarded connection: its two streams and the pod-side socket."""

    port: str
    request: str = ""
    error: int | None = None
    data: int | None = None
    writer: asyncio.StreamWriter | None = None
    pump: asyncio.Task[None] | None = None

    def close(self) -> None:
        if self.pump is not None:
            self.pump.cancel()
        if self.writer is not None:
            self.writer.close()


class Tunnel:
    """Serves one websocket's SPDY session to a pod whose ports are ``ports``."""

    def __init__(
        self,
        ws: web.WebSocketResponse,
        ports: Mapping[int, int],
        uid: str,
        notes: Mapping[int, str],
    ) -> None:
        self.ws, self.ports, self.uid, self.notes = ws, ports, uid, notes
        self.codec = HeaderCodec()
        self._requests: dict[str, _Connection] = {}
        self._streams: dict[int, _Connection] = {}

    async def run(self) -> None:
        buffer = bytearray()
        try:
            async for message in self.ws:
                if message.type != WSMsgType.BINARY:
                    continue
                buffer += message.data
                while (frame := take_frame(buffer)) is not None:
                    if not await self._on(frame):
                        return
        finally:
            for connection in list(self._requests.values()):
                connection.close()

    async def _send(self, frame: bytes) -> None:
        with contextlib.suppress(ConnectionResetError):
            await self.ws.send_bytes(frame)

    async def _on(self, frame: Frame) -> bool:
        """Handle one frame; False when the peer ends the session."""
        connection = self._streams.get(frame.stream_id)
        if not frame.control:
            if connection is not None and connection.writer is not None:
                if frame.stream_id == connection.data and frame.payload:
                    connection.writer.write(frame.payload)
                    with contextlib.suppress(OSError):
                        await connection.writer.drain()
                if frame.stream_id == connection.data and frame.fin:
                    with contextlib.suppress(OSError):
                        connection.writer.write_eof()
            return True
        if frame.type == SYN_STREAM:
            await self._open(frame)
        elif frame.type == RST_STREAM and connection is not None:
            self._forget(connection)
        elif frame.type == PING:
            await self._send(control_frame(PING, frame.payload[:4]))
        return frame.type != GOAWAY

    async def _open(self, frame: Frame) -> None:
        headers = self.codec.decode(frame.payload[10:])
        stream_id = frame.stream_id
        await self._send(self.codec.syn_reply(stream_id))
        kind = headers.get("streamtype")
        request = headers.get("requestid", "")
        connection = self._requests.setdefault(request, _Connection(headers.get("port", "")))
        connection.request = request
        self._streams[stream_id] = connection
        if kind == "error":
            connection.error = stream_id
        elif kind == "data":
            connection.data = stream_id
        else:
            await self._send(
                control_frame(RST_STREAM, struct.pack(">II", stream_id, PROTOCOL_ERROR))
            )
            return
        if connection.error is not None and connection.data is not None:
            await self._connect(connection)

    async def _connect(self, connection: _Connection) -> None:
        assert connection.error is not None
        assert connection.data is not None
        try:
            port = int(connection.port)
            reader, writer = await asyncio.open_connection("127.0.0.1", self.ports.get(port, port))
        except ValueError:
            await self._fail(connection, f"invalid port header {connection.port!r}")
            return
        except OSError as exc:
            await self._fail(
                connection, forward_error(port, self.uid, exc, self.notes.get(port, ""))
            )
            return
        connection.writer = writer
        connection.pump = asyncio.create_task(self._pump(connection, reader))

    async def _fail(self, connection: _Connection, message: str) -> None:
        assert connection.error is not None
        assert connection.data is not None
        await self._send(data_frame(connection.error, message.encode(), fin=True))
        await self._send(data_frame(connection.data, b"", fin=True))
        self._forget(connection)

    def _forget(self, connection: _Connection) -> None:
        """A connection that is over: closed, and no longer looked up by its streams."""
        connection.close()
        self._requests.pop(connection.request, None)
        for stream_id in (connection.error, connection.data):
            self._streams.pop(stream_id or 0, None)

    async def _pump(self, connection: _Connection, reader: asyncio.StreamReader) -> None:
        """Pod → kubectl, then FIN on the data stream and on the error stream."""
        assert connection.error is not None
        assert connection.data is not None
        with contextlib.suppress(OSError):
            while chunk := await reader.read(MAX_DATA):
                await self._send(data_frame(connection.data, chunk))
        await self._send(data_frame(connection.data, b"", fin=True))
        await self._send(data_frame(connection.error, b"", fin=True))
        connection.pump = None  # this task ends here: nothing to cancel
        self._forget(connection)
