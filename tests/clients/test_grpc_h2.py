"""testbed's gRPC client (clients/grpc_channel.py) against a scripted HTTP/2 server.

The server (tests/fixtures/h2_server.py) is scripted per test: it sends what a grpcio
server does not produce on demand — header blocks in CONTINUATIONs, padding, messages split
across DATA frames or several in one, Trailers-Only answers, RST_STREAM, GOAWAY, a stream
limit — and checks what the client must send back (SETTINGS and PING ACKs, WINDOW_UPDATEs,
its header block). Through TgisPool (connections lost, deadlines, grpcio's server):
tests/clients/test_tgis_connection.py.
"""

from __future__ import annotations

import asyncio
import struct

import pytest
from hpack import Encoder, NeverIndexedHeaderTuple

from testbed.clients.grpc_channel import GrpcChannel, GrpcError
from tests.fixtures.h2_server import (
    CONTINUATION,
    DATA,
    END_HEADERS,
    END_STREAM,
    GOAWAY,
    HEADERS,
    OK_HEAD,
    PADDED,
    PING,
    PRIORITY,
    PRIORITY_FLAG,
    RST_STREAM,
    SETTINGS,
    WINDOW_UPDATE,
    Handler,
    Peer,
    frame,
    message,
    scripted,
)

PATH = "/test.Service/Method"


async def collect(
    channel: GrpcChannel, body: bytes, timeout_s: float | None = 5.0
) -> list[tuple[bytes, int]]:
    got: list[tuple[bytes, int]] = []
    await channel.call(PATH, body, lambda data, t_ns: got.append((data, t_ns)), timeout_s)
    return got


async def test_frames_split_padded_continued_and_acknowledged() -> None:
    """HEADERS with padding and priority continued in a CONTINUATION; two messages in one
    DATA frame; one message in three pieces (the first shorter than its prefix, one padded);
    an empty message; trailers in a CONTINUATION; PING, PRIORITY and an unknown frame type
    in between. The client answers the PING and the SETTINGS, and sends its header block
    (the secret never indexed)."""
    acks: list[bytes] = []
    acked = asyncio.Event()
    parts = [b"one", b"two", b"three" * 10, b""]

    async def handler(peer: Peer, _: int) -> None:
        await peer.handshake({3: 100})
        sid, _, body = await peer.request()
        assert body == message(b"hello")
        block = peer.encoder.encode(OK_HEAD)
        head = bytes([4]) + b"\x00\x00\x00\x00\x10" + block[:2] + b"\x00" * 4
        third = message(parts[2])
        trail = peer.encoder.encode([("grpc-status", "0")])
        peer.send(
            frame(HEADERS, PADDED | PRIORITY_FLAG, sid, head),
            frame(CONTINUATION, END_HEADERS, sid, block[2:]),
            frame(PING, 0, 0, b"12345678"),
            frame(PRIORITY, 0, sid, b"\x00\x00\x00\x00\x10"),
            frame(0xFA, 0, 0, b"unknown"),
            frame(DATA, 0, sid, message(parts[0]) + message(parts[1])),
            frame(DATA, 0, sid, third[:3]),
            frame(DATA, PADDED, sid, bytes([5]) + third[3:20] + b"\x00" * 5),
            frame(DATA, 0, sid, third[20:] + message(parts[3])),
            frame(HEADERS, END_STREAM, sid, trail[:1]),
            frame(CONTINUATION, END_HEADERS, sid, trail[1:]),
        )
        while True:
            kind, flags, _, payload = await peer.frame()
            if kind == PING and flags & 1:
                acks.append(payload)
                acked.set()
                return

    async with scripted(handler) as script:
        channel = GrpcChannel(script.target, metadata=(("authorization", "Bearer s3cret"),))
        try:
            got = await collect(channel, b"hello", timeout_s=7.5)
            async with asyncio.timeout(5):
                await acked.wait()
        finally:
            await channel.aclose()
    assert [data for data, _ in got] == parts
    assert got[0][1] == got[1][1]  # one frame, one read: one arrival time
    assert [t for _, t in got] == sorted(t for _, t in got)
    assert acks == [b"12345678"]
    peer = script.peers[0]
    assert any(k == SETTINGS and f & 1 for k, f, _, _ in peer.seen)  # its SETTINGS acked
    _, headers, _ = peer.requests[0]
    assert {k: v[1] for k, v in headers.items()} == {
        ":method": "POST",
        ":scheme": "http",
        ":path": PATH,
        ":authority": script.target,
        "content-type": "application/grpc",
        "te": "trailers",
        "user-agent": "testbed-grpc",
        "authorization": "Bearer s3cret",
        "grpc-timeout": "7500m",
    }
    assert isinstance(headers["authorization"], NeverIndexedHeaderTuple)


async def test_statuses_trailers_only_http_errors_and_missing_status() -> None:
    """A Trailers-Only answer's status and percent-encoded message; an HTTP error without a
    gRPC status (mapped as gRPC's spec says); a stream ended without any status."""

    async def handler(peer: Peer, _: int) -> None:
        await peer.handshake()
        while True:
            sid, _, body = await peer.request()
            if body == message(b"refuse"):
                text = "max_new_tokens%20must%20be%20%E2%89%A4%208%3A%20100%25"
                status = [("grpc-status", "3"), ("grpc-message", text)]
                peer.send(peer.headers(sid, [*OK_HEAD, *status], end=True))
            elif body == message(b"http"):
                peer.send(peer.headers(sid, [(":status", "503")], end=True))
            else:  # DATA with END_STREAM, no trailers
                peer.send(peer.headers(sid, OK_HEAD), frame(DATA, END_STREAM, sid, message(b"x")))

    async with scripted(handler) as script:
        channel = GrpcChannel(script.target)
        errors: dict[str, GrpcError] = {}
        try:
            for body in ("refuse", "http", "unfinished"):
                with pytest.raises(GrpcError) as caught:
                    await collect(channel, body.encode())
                errors[body] = caught.value
        finally:
            await channel.aclose()
    assert errors["refuse"].code == "INVALID_ARGUMENT"
    assert errors["refuse"].details == "max_new_tokens must be ≤ 8: 100%"
    assert errors["refuse"].answered
    assert errors["http"].code == "UNAVAILABLE"
    assert "HTTP status 503" in errors["http"].details
    assert errors["unfinished"].code == "INTERNAL"
    assert "without a grpc-status" in errors["unfinished"].details
    assert len(script.peers) == 1  # errors of calls, not of the connection


async def test_a_reset_stream_fails_that_call_only() -> None:
    async def handler(peer: Peer, _: int) -> None:
        await peer.handshake()
        first, _, _ = await peer.request()
        second, _, _ = await peer.request()
        peer.send(
            peer.headers(first, OK_HEAD),
            frame(DATA, 0, first, message(b"partial")),
            frame(RST_STREAM, 0, first, struct.pack(">I", 8)),  # CANCEL
            peer.headers(second, OK_HEAD),
            frame(DATA, 0, second, message(b"whole")),
            peer.trailers(second),
        )

    async with scripted(handler) as script:
        channel = GrpcChannel(script.target)
        try:
            cut, whole = await asyncio.gather(
                collect(channel, b"a"), collect(channel, b"b"), return_exceptions=True
            )
        finally:
            await channel.aclose()
    assert isinstance(cut, GrpcError)
    assert cut.code == "CANCELLED"
    assert cut.details == "the server reset the stream (CANCEL)"
    assert whole == [(b"whole", whole[0][1])]  # type: ignore[index]


async def test_goaway_lets_running_calls_finish_and_unprocessed_ones_retry() -> None:
    """The server takes two calls, then says GOAWAY with the first's id as its last: the
    first finishes there, the second is sent again on a new connection, and so are later
    calls."""

    async def handler(peer: Peer, number: int) -> None:
        await peer.handshake()
        if number == 1:
            first, _, _ = await peer.request()
            await peer.request()
            goaway = struct.pack(">II", first, 0) + b"restarting"
            peer.send(
                frame(GOAWAY, 0, 0, goaway),
                peer.headers(first, OK_HEAD),
                frame(DATA, 0, first, message(b"from 1")),
                peer.trailers(first),
            )
            return
        while True:
            sid, _, body = await peer.request()
            answer = message(b"from 2 to " + body[5:])
            peer.send(peer.headers(sid, OK_HEAD), frame(DATA, 0, sid, answer), peer.trailers(sid))

    async with scripted(handler) as script:
        channel = GrpcChannel(script.target)
        try:
            first, second = await asyncio.gather(collect(channel, b"a"), collect(channel, b"b"))
            later = await collect(channel, b"c")
        finally:
            await channel.aclose()
    assert [d for d, _ in first] == [b"from 1"]
    assert [d for d, _ in second] == [b"from 2 to b"]
    assert [d for d, _ in later] == [b"from 2 to c"]
    assert len(script.peers) == 2
    assert [sid for sid, _, _ in script.peers[1].requests] == [1, 3]


async def test_waits_for_the_servers_stream_limit() -> None:
    seen_open: list[int] = []
    channel: GrpcChannel | None = None

    async def handler(peer: Peer, _: int) -> None:
        await peer.handshake({3: 1})  # MAX_CONCURRENT_STREAMS
        while True:
            sid, _, body = await peer.request()
            assert channel is not None
            seen_open.append((await channel.connection()).open_streams)
            peer.send(peer.headers(sid, OK_HEAD), frame(DATA, 0, sid, body), peer.trailers(sid))

    async with scripted(handler) as script:
        channel = GrpcChannel(script.target)
        try:
            answers = await asyncio.gather(*(collect(channel, b"%d" % i) for i in range(4)))
        finally:
            await channel.aclose()
    assert [a[0][0] for a in answers] == [b"0", b"1", b"2", b"3"]
    assert seen_open == [1, 1, 1, 1]


async def test_flow_control_both_ways() -> None:
    """The server's stream window is 10 bytes: the request goes out in pieces as it grants
    more. Its answer (20 MiB) is larger than the window the client opened: the client's
    WINDOW_UPDATEs let it through."""
    request = bytes(range(256)) * 4
    answer = [bytes([i]) * (1 << 20) for i in range(20)]

    async def handler(peer: Peer, _: int) -> None:
        await peer.handshake({4: 10})  # INITIAL_WINDOW_SIZE
        body, sid = b"", 0
        while True:
            kind, flags, fsid, payload = await peer.frame()
            if kind == HEADERS:
                sid = fsid
            elif kind == DATA:
                assert len(payload) <= 10
                body += payload
                if flags & END_STREAM:
                    break
                peer.send(frame(WINDOW_UPDATE, 0, sid, struct.pack(">I", 10)))
        peer.requests.append((sid, {}, body))
        peer.send(peer.headers(sid, OK_HEAD))
        await peer.send_data(sid, b"".join(message(part) for part in answer))
        peer.send(peer.trailers(sid))

    async with scripted(handler) as script:
        channel = GrpcChannel(script.target)
        try:
            got = await collect(channel, request, timeout_s=30)
        finally:
            await channel.aclose()
    assert script.peers[0].requests[0][2] == message(request)
    assert [d for d, _ in got] == answer
    stream_updates = [n for sid, n in script.peers[0].granted if sid]
    assert 1 <= len(stream_updates) <= 3  # given back in batches, not per frame


async def test_frames_read_one_byte_at_a_time() -> None:
    """Frame headers, prefixes and header blocks cut at every byte boundary."""
    from testbed.clients.grpc_h2 import GrpcConnection

    class Transport:
        def write(self, data: bytes) -> None:
            del data

        def close(self) -> None: ...

    conn = GrpcConnection()
    conn.connection_made(Transport())  # type: ignore[arg-type]
    got: list[bytes] = []
    stream = conn.open(b"", b"request", lambda data, t_ns: got.append(data))
    encoder = Encoder()
    wire = (
        frame(SETTINGS, 0, 0)
        + frame(HEADERS, END_HEADERS, 1, encoder.encode(OK_HEAD))
        + frame(DATA, 0, 1, message(b"first") + message(b"second")[:4])
        + frame(DATA, 0, 1, message(b"second")[4:])
        + frame(HEADERS, END_HEADERS | END_STREAM, 1, encoder.encode([("grpc-status", "0")]))
    )
    for pos in range(len(wire)):
        conn.data_received(wire[pos : pos + 1])
    assert got == [b"first", b"second"]
    assert stream.done.done()
    assert stream.done.result() is None
    assert conn.usable


async def test_a_call_that_gave_up_waiting_for_a_stream_does_not_keep_the_slot() -> None:
    """One stream at a time: the second call times out while it waits; when the first ends,
    the third gets the freed stream."""
    release, holding = asyncio.Event(), asyncio.Event()

    async def handler(peer: Peer, _: int) -> None:
        await peer.handshake({3: 1})  # MAX_CONCURRENT_STREAMS
        while True:
            sid, _, body = await peer.request()
            if body == message(b"first"):
                holding.set()
                await release.wait()
            peer.send(peer.headers(sid, OK_HEAD), frame(DATA, 0, sid, body), peer.trailers(sid))

    async with scripted(handler) as script:
        channel = GrpcChannel(script.target)
        try:
            first = asyncio.create_task(collect(channel, b"first"))
            await holding.wait()
            with pytest.raises(TimeoutError):
                await collect(channel, b"second", timeout_s=0.05)
            third = asyncio.create_task(collect(channel, b"third"))
            release.set()
            async with asyncio.timeout(5):
                answers = [await first, await third]
        finally:
            await channel.aclose()
    assert [a[0][0] for a in answers] == [b"first", b"third"]
    assert [body for _, _, body in script.peers[0].requests] == [
        message(b"first"),
        message(b"third"),
    ]


async def wait_for_goaway(peer: Peer) -> None:
    """Read the client's frames until its GOAWAY, kept as the peer's last request."""
    while True:
        kind, _, _, payload = await peer.frame()
        if kind == GOAWAY:
            peer.requests.append((0, {}, payload))
            return


async def fails_with_goaway(handler: Handler) -> tuple[GrpcError, int]:
    """One call against ``handler``'s server: the error it fails with, and the error code
    of the GOAWAY the client sent."""
    async with scripted(handler) as script:
        channel = GrpcChannel(script.target)
        try:
            with pytest.raises(GrpcError) as caught:
                await collect(channel, b"x", timeout_s=5)
        finally:
            await channel.aclose()
    goaway = script.peers[0].requests[-1][2]
    return caught.value, struct.unpack(">I", goaway[4:8])[0]


@pytest.mark.parametrize(
    ("setting", "value", "code", "words"),
    [
        (5, 0, 1, "SETTINGS_MAX_FRAME_SIZE 0"),  # would frame a header block into 0-byte pieces
        (5, 1 << 24, 1, "SETTINGS_MAX_FRAME_SIZE 16777216"),
        (4, 1 << 31, 3, "SETTINGS_INITIAL_WINDOW_SIZE 2147483648"),
        (2, 2, 1, "SETTINGS_ENABLE_PUSH 2"),
    ],
)
async def test_settings_out_of_range_end_the_connection(
    setting: int, value: int, code: int, words: str
) -> None:
    """A server whose SETTINGS break RFC 9113 §6.5.2 gets GOAWAY with the error the RFC
    names; the call fails saying which setting, instead of hanging or framing nonsense."""

    async def handler(peer: Peer, _: int) -> None:
        await peer.handshake({setting: value})
        await wait_for_goaway(peer)

    failed, goaway = await fails_with_goaway(handler)
    assert words in failed.details
    assert goaway == code


async def test_a_continuation_flood_ends_the_connection() -> None:
    """A server whose header block never ends is not buffered past 64 KiB: GOAWAY
    ENHANCE_YOUR_CALM, and the call fails saying why."""

    async def handler(peer: Peer, _: int) -> None:
        await peer.handshake()
        sid, _, _ = await peer.request()
        peer.send(frame(HEADERS, 0, sid, Encoder().encode(OK_HEAD)))
        for _ in range(5):
            peer.send(frame(CONTINUATION, 0, sid, b"\x40" * 16384))
        await wait_for_goaway(peer)

    failed, goaway = await fails_with_goaway(handler)
    assert "header block over 65536 bytes" in failed.details
    assert goaway == 11  # ENHANCE_YOUR_CALM
