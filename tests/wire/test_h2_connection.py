"""The one HTTP/2 connection state machine both gRPC sides subclass (testbed.wire): what a
peer sends is read alike by the client and the simulator's server — connection errors,
header blocks, flow control both ways."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from testbed.clients.grpc_h2 import GrpcConnection
from testbed.servers.sim.h2 import Door, H2ServerConnection
from testbed.wire import h2 as w
from testbed.wire.h2_connection import H2Connection


class Transport(asyncio.Transport):
    """What the connection writes, and whether it closed."""

    def __init__(self) -> None:
        super().__init__()
        self.out = bytearray()
        self.closed = False

    def write(self, data: Any) -> None:
        self.out += data

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def frames(self) -> Iterator[tuple[int, int, int, bytes]]:
        """(type, flags, stream, payload) of every frame written, the preface skipped."""
        data = bytes(self.out).removeprefix(w.PREFACE)
        pos = 0
        while pos + 9 <= len(data):
            length = int.from_bytes(data[pos : pos + 3], "big")
            payload = data[pos + 9 : pos + 9 + length]
            yield (
                data[pos + 3],
                data[pos + 4],
                int.from_bytes(data[pos + 5 : pos + 9], "big"),
                payload,
            )
            pos += 9 + length

    def goaway_code(self) -> int | None:
        codes = [int.from_bytes(p[4:8], "big") for k, _, _, p in self.frames() if k == w.GOAWAY]
        return codes[-1] if codes else None


@dataclass
class Flow:
    """A stream as the connection keeps it."""

    id: int
    window: int = w.DEFAULT_WINDOW
    pending: bytes = b""
    unacked: int = 0
    data: list[bytes] = field(default_factory=list)


class Role(H2Connection[Flow]):
    """A role that keeps what the hooks hear; its streams' DATA ends them (as a client's)."""

    DATA_ENDS_STREAM = True

    def __init__(self) -> None:
        super().__init__()
        self.heard: list[tuple[Any, ...]] = []
        self.transport = Transport()  # type: ignore[assignment]

    def received(self, stream: Flow, data: bytes, end_stream: bool, t_ns: int) -> None:
        stream.data.append(data)
        self.heard.append(("data", stream.id, data, end_stream))

    def headers(self, sid: int, end_stream: bool, fields: dict[bytes, bytes]) -> None:
        self.heard.append(("headers", sid, end_stream, fields))

    def drained(self, stream: Flow) -> bytes:
        return b"TRAILERS"


def out(conn: H2Connection[Any]) -> Transport:
    assert isinstance(conn.transport, Transport)
    return conn.transport


def roles() -> list[H2Connection[Any]]:
    """The client and the server, each on a fake transport, after its own first write."""
    client = GrpcConnection()
    server = H2ServerConnection(Door(lambda call: None))
    for conn in (client, server):
        conn.connection_made(Transport())  # type: ignore[arg-type]
    server.data_received(w.PREFACE)
    return [client, server]


@pytest.mark.parametrize("role", ["client", "server"])
@pytest.mark.parametrize(
    ("sent", "code"),
    [
        (w.frame(w.SETTINGS, 0, 1, b""), w.PROTOCOL_ERROR),  # SETTINGS on a stream
        (w.frame(w.WINDOW_UPDATE, 0, 0, b"\0\0\0\0"), w.PROTOCOL_ERROR),
        (w.frame(w.DATA, 0, 0, b"x"), w.PROTOCOL_ERROR),  # DATA on stream 0
        (b"\0\x40\x01" + bytes(6), w.FRAME_SIZE_ERROR),  # a frame over our 16 KiB
        (w.frame(w.HEADERS, 0, 1, b"\x88") + w.frame(w.PING, 0, 0, bytes(8)), w.PROTOCOL_ERROR),
        (w.frame(w.PUSH_PROMISE, w.END_HEADERS, 1, bytes(4)), w.PROTOCOL_ERROR),
        (w.frame(w.HEADERS, w.END_HEADERS, 1, b"\xff\xff\xff\xff"), w.COMPRESSION_ERROR),
    ],
    ids=[
        "settings-on-stream",
        "zero-window",
        "data-0",
        "frame-size",
        "interrupted",
        "push",
        "hpack",
    ],
)
def test_both_roles_answer_a_connection_error_with_goaway(
    role: str, sent: bytes, code: int
) -> None:
    async def main() -> Transport:
        client, server = roles()
        conn = client if role == "client" else server
        conn.data_received(sent)
        return out(conn)

    transport = asyncio.run(main())
    assert transport.goaway_code() == code
    assert transport.closed


def test_the_server_side_wants_the_client_preface() -> None:
    class Serving(Role):
        SERVES = True

    conn = Serving()
    conn.data_received(w.PREFACE[:10])  # a prefix so far: waits
    assert out(conn).goaway_code() is None
    conn.data_received(b"GET / HTTP/1.1\r\n\r\n")
    assert out(conn).goaway_code() == w.PROTOCOL_ERROR


def test_a_header_block_across_continuation_is_decoded_once_with_the_headers_end_stream() -> None:
    conn = Role()
    block = w.literal("grpc-status", "0") + w.literal("grpc-message", "fine")
    conn.data_received(
        w.frame(w.HEADERS, w.END_STREAM, 3, block[:5])
        + w.frame(w.CONTINUATION, w.END_HEADERS, 3, block[5:])
    )
    assert conn.heard == [("headers", 3, True, {b"grpc-status": b"0", b"grpc-message": b"fine"})]


def test_padding_counts_for_the_read_window_and_is_stripped() -> None:
    conn = Role()
    stream = conn.streams[1] = Flow(1)
    padded = bytes([4]) + b"abc" + bytes(4)  # pad length 4
    conn.data_received(w.frame(w.DATA, w.PADDED, 1, padded))
    assert stream.data == [b"abc"]
    assert stream.unacked == len(padded)


def test_data_waits_for_the_peer_s_windows_then_leaves_with_what_follows_it() -> None:
    conn = Role()
    stream = conn.streams[1] = Flow(1, window=10)
    head = w.frame(w.HEADERS, w.END_HEADERS, 1, w.RESPONSE_BLOCK)
    conn.send_data(stream, b"x" * 25, head=head)
    sent = list(out(conn).frames())
    assert out(conn).out.startswith(head)
    assert stream.pending == b"x" * 15  # 10 bytes went: the stream's window
    conn.data_received(w.window_update(1, 100))
    data = [p for k, _, sid, p in out(conn).frames() if k == w.DATA and sid == 1]
    assert b"".join(data) == b"x" * 25
    assert [f for k, f, _, _ in out(conn).frames() if k == w.DATA][-1] & w.END_STREAM
    assert out(conn).out.endswith(b"TRAILERS")
    assert stream.pending == b""
    assert len(sent) < len(list(out(conn).frames()))


def test_the_peer_s_initial_window_moves_every_open_stream_s() -> None:
    conn = Role()
    stream = conn.streams[1] = Flow(1, window=100)
    conn.data_received(
        w.settings({w.INITIAL_WINDOW_SIZE: w.DEFAULT_WINDOW + 50, w.MAX_FRAME_SIZE: 20_000})
    )
    assert stream.window == 150
    assert conn.max_frame == 20_000
    assert (w.SETTINGS, w.ACK) in [(k, f) for k, f, _, _ in out(conn).frames()]


def test_reading_half_a_connection_window_gives_it_back() -> None:
    conn = Role()
    conn.streams[1] = Flow(1)
    chunk = b"y" * 16_000
    for _ in range(3):  # 48,000 B read of the default 65,535 B window
        conn.data_received(w.frame(w.DATA, 0, 1, chunk))
    updates = [
        (sid, int.from_bytes(p, "big"))
        for k, _, sid, p in out(conn).frames()
        if k == w.WINDOW_UPDATE
    ]
    assert (0, 48_000) in updates  # the connection's
    assert (1, 48_000) in updates  # and the stream's
