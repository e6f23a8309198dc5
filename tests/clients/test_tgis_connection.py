"""TgisPool over testbed's gRPC client when the connection misbehaves, and against grpcio.

A connection lost mid-stream cuts the answer short (the sink's error, what came is kept);
one lost before any answer, or a port that does not speak HTTP/2, is an unreachable server;
a deadline raises TimeoutError and resets the stream on the server. The scripted server is
tests/fixtures/h2_server.py; the last test runs against grpcio's server and the simulator's.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import AsyncIterator
from typing import Any

import pytest

from testbed.clients import tgis
from testbed.clients.http_errors import ConnectError, RemoteProtocolError
from testbed.proto.fmaas import generation_pb2 as pb
from tests.fixtures.h2_server import (
    DATA,
    OK_HEAD,
    RST_STREAM,
    Peer,
    Script,
    frame,
    message,
    scripted,
)


def generation(**fields: Any) -> bytes:
    return message(pb.GenerationResponse(**fields).SerializeToString())


STREAM_BODY = {"requests": [{"text": "hi"}], "params": {"stopping": {"max_new_tokens": 4}}}


async def send_tgis(script: Script, timeout_s: float = 5.0) -> tgis.TgisSink:
    pool = tgis.TgisPool(script.target)
    sink = tgis.sink(stream=True)
    try:
        await pool.send(tgis.encode(STREAM_BODY, stream=True), sink, timeout_s)
    finally:
        await pool.aclose()
    return sink


async def test_a_connection_lost_mid_stream_cuts_the_answer_short() -> None:
    async def handler(peer: Peer, _: int) -> None:
        await peer.handshake()
        sid, _, _ = await peer.request()
        peer.send(
            peer.headers(sid, OK_HEAD),
            frame(DATA, 0, sid, generation(input_token_count=1)),
            frame(DATA, 0, sid, generation(text=" a", generated_token_count=1)),
        )
        await peer.writer.drain()
        peer.writer.transport.abort()

    async with scripted(handler) as script:
        sink = await send_tgis(script)
    response = sink.response
    assert response.status == 503
    assert response.error is not None
    assert response.error.startswith("gRPC UNAVAILABLE: the connection closed"), response.error
    assert [text for _, text in response.chunks] == [" a"]
    assert response.t_done_ns >= response.chunks[0][0]


async def test_no_answer_and_no_http2_are_connection_errors() -> None:
    """A server that closes before answering anything, and one that does not speak HTTP/2
    (it closes at the preface): no answer came, as when nothing listens."""

    async def closes_after_request(peer: Peer, _: int) -> None:
        await peer.handshake()
        await peer.request()
        peer.writer.transport.abort()

    async def not_http2(peer: Peer, _: int) -> None:
        await peer.reader.readexactly(24)
        peer.writer.write(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n")
        peer.writer.transport.close()

    async with scripted(closes_after_request) as script:
        with pytest.raises(
            RemoteProtocolError,
            match=r"^no answer from 127\.0\.0\.1:\d+: the connection closed",
        ):
            await send_tgis(script)
    async with scripted(not_http2) as script:
        with pytest.raises(ConnectError, match=r"^cannot connect to .*before its HTTP/2 SETTINGS"):
            await send_tgis(script)


async def test_a_deadline_cancels_the_stream_on_the_server() -> None:
    reset: list[tuple[int, bytes]] = []
    was_reset = asyncio.Event()

    async def handler(peer: Peer, _: int) -> None:
        await peer.handshake()
        sid, _, _ = await peer.request()
        peer.send(peer.headers(sid, OK_HEAD), frame(DATA, 0, sid, generation(input_token_count=1)))
        while True:
            kind, _, fsid, payload = await peer.frame()
            if kind == RST_STREAM:
                reset.append((fsid, payload))
                was_reset.set()
                return

    async with scripted(handler) as script:
        pool = tgis.TgisPool(script.target)
        try:
            with pytest.raises(TimeoutError):
                await pool.send(tgis.encode(STREAM_BODY, stream=True), tgis.sink(stream=True), 0.3)
            async with asyncio.timeout(5):
                await was_reset.wait()
        finally:
            await pool.aclose()
    assert reset == [(1, struct.pack(">I", 8))]  # CANCEL
    assert script.peers[0].requests[0][1]["grpc-timeout"][1] == "300m"


class _GrpcioServicer:
    """Just enough of ``fmaas.GenerationService`` on grpcio's server for the client's test."""

    async def GenerateStream(self, request: Any, context: Any) -> Any:
        n = request.params.stopping.max_new_tokens
        for i in range(n):
            message = pb.GenerationResponse(text=f" t{i}", generated_token_count=i + 1)
            if i == n - 1:
                message.stop_reason = pb.StopReason.MAX_TOKENS
            yield message

    async def Tokenize(self, request: Any, context: Any) -> Any:
        return pb.BatchedTokenizeResponse(
            responses=[
                pb.TokenizeResponse(token_count=len(r.text.split()), tokens=r.text.split())
                for r in request.requests
            ]
        )


@contextlib.asynccontextmanager
async def grpcio_server() -> AsyncIterator[str]:
    from testbed.proto.fmaas import generation_pb2_grpc as pbg
    from testbed.servers import grpc_server

    servicer = type("Servicer", (_GrpcioServicer, pbg.GenerationServiceServicer), {})()
    server, port = await grpc_server.start(servicer, "127.0.0.1", 0, "the test's grpcio server")
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(None)


@contextlib.asynccontextmanager
async def sim_server() -> AsyncIterator[str]:
    from testbed.config.sim import SimParams
    from testbed.servers.sim.server import SimServer

    async with SimServer(SimParams(protocols=("tgis",), itl_ms=1.0)) as server:
        assert server.grpc_target is not None
        yield server.grpc_target


@pytest.mark.parametrize("serve", [grpcio_server, sim_server], ids=["grpcio", "simulator"])
async def test_many_streams_and_a_long_answer(serve: Any) -> None:
    """Against grpcio's server and the simulator's own: 64 streams at once share one
    connection (grpcio's header blocks use HPACK's dynamic table), and a 200 KB answer
    spans many DATA frames."""
    async with serve() as target:
        pool = tgis.TgisPool(target)
        sinks = [tgis.sink(stream=True) for _ in range(64)]
        try:
            payload = tgis.encode(STREAM_BODY, stream=True)
            await asyncio.gather(*(pool.send(payload, sink, 20) for sink in sinks))
            connections = pool._channel.open_connections
            words = [f"w{i}" for i in range(20_000)]
            tokens = await pool.tokenize([" ".join(words)], return_tokens=True)
        finally:
            await pool.aclose()
    assert all(s.response.ok for s in sinks), [s.response.error for s in sinks]
    assert {len(s.response.chunks) for s in sinks} == {4}
    assert connections == 1
    assert list(tokens.responses[0].tokens) == words
    assert tokens.ByteSize() > 100_000
