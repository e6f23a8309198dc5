"""The simulator's own HTTP/2 gRPC server (servers/sim/h2.py), spoken to by grpcio's client
(another implementation than testbed's) and frame by frame: the four TGIS methods, refusals
as gRPC statuses, deadlines and cancellation freeing the slot, the client's flow-control
window respected, a server that stops with calls in flight, and what is not gRPC."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from hpack import Decoder

from testbed.clients import tgis
from testbed.config.sim import SimParams
from testbed.proto.fmaas import generation_pb2 as pb
from testbed.proto.fmaas import generation_pb2_grpc as pbg
from testbed.servers.sim.server import SimServer
from testbed.wire import h2 as w


def _request(n: int, text: str = "a b c d", **stopping: Any) -> pb.SingleGenerationRequest:
    return pb.SingleGenerationRequest(
        request=pb.GenerationRequest(text=text),
        params=pb.Parameters(stopping=pb.StoppingCriteria(max_new_tokens=n, **stopping)),
    )


@contextlib.asynccontextmanager
async def served(**params: Any) -> AsyncIterator[tuple[SimServer, Any]]:
    async with SimServer(SimParams(protocols=("tgis",), **params)) as server:
        assert server.grpc_target is not None
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            yield server, pbg.GenerationServiceStub(channel)


async def test_the_four_methods_through_grpcio() -> None:
    async with served() as (server, stub):
        stream = [m async for m in stub.GenerateStream(_request(5, min_new_tokens=5))]
        batch = await stub.Generate(
            pb.BatchedGenerationRequest(
                requests=[pb.GenerationRequest(text="x y"), pb.GenerationRequest(text="z")],
                params=pb.Parameters(stopping=pb.StoppingCriteria(max_new_tokens=3)),
            )
        )
        tokens = await stub.Tokenize(
            pb.BatchedTokenizeRequest(
                requests=[pb.TokenizeRequest(text="one two three")], return_tokens=True
            )
        )
        info = await stub.ModelInfo(pb.ModelInfoRequest(model_id="any"))
        metrics = server.metrics
    assert stream[0].input_token_count == 4
    assert [m.generated_token_count for m in stream if m.text] == [1, 2, 3, 4, 5]
    assert stream[-1].stop_reason == pb.StopReason.MAX_TOKENS
    assert [r.input_token_count for r in batch.responses] == [2, 1]
    assert all(r.generated_token_count <= 3 and r.stop_reason for r in batch.responses)
    assert list(tokens.responses[0].tokens) == ["one", "two", "three"]
    assert info.max_new_tokens == 1024
    assert metrics.prompt_tokens == 4 + 2 + 1
    assert metrics.running == 0


async def test_refusals_are_grpc_statuses() -> None:
    async with served() as (_server, stub):
        with pytest.raises(grpc.aio.AioRpcError) as too_long:
            await stub.Generate(
                pb.BatchedGenerationRequest(
                    requests=[pb.GenerationRequest(text="x")],
                    params=pb.Parameters(stopping=pb.StoppingCriteria(max_new_tokens=5000)),
                )
            )
        channel = grpc.aio.insecure_channel(_server.grpc_target or "")
        nope = channel.unary_unary("/fmaas.GenerationService/Nope")
        with pytest.raises(grpc.aio.AioRpcError) as unknown:
            await nope(b"")
        garbage = channel.unary_unary("/fmaas.GenerationService/Generate")
        with pytest.raises(grpc.aio.AioRpcError) as undecodable:
            await garbage(b"\xff\xff\xff")
        garbage_stream = channel.unary_stream("/fmaas.GenerationService/GenerateStream")
        with pytest.raises(grpc.aio.AioRpcError) as undecodable_stream:
            async for _ in garbage_stream(b"\xff\xff\xff"):
                pass
        await channel.close()
    assert too_long.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "max_new_tokens must be at most 1024" in (too_long.value.details() or "")
    assert unknown.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert undecodable.value.code() == grpc.StatusCode.INTERNAL
    assert undecodable_stream.value.code() == grpc.StatusCode.INTERNAL


async def test_a_deadline_and_a_cancel_free_the_slot() -> None:
    async with served(itl_ms=50.0, max_concurrency=1) as (server, stub):
        with pytest.raises(grpc.aio.AioRpcError) as late:
            async for _ in stub.GenerateStream(_request(40, min_new_tokens=40), timeout=0.3):
                pass
        call = stub.GenerateStream(_request(40, min_new_tokens=40))
        await call.read()
        call.cancel()
        for _ in range(50):  # the RST_STREAM reaches the server a moment later
            if server.metrics.running == 0:
                break
            await asyncio.sleep(0.01)
        served_after = [m async for m in stub.GenerateStream(_request(2, min_new_tokens=2))]
        metrics = server.metrics
    assert late.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert metrics.aborted == 2  # both calls freed the only slot …
    assert len([m for m in served_after if m.text]) == 2  # … which the next call got


async def test_a_server_stopping_mid_call_ends_it_unavailable() -> None:
    server = SimServer(SimParams(protocols=("tgis",), itl_ms=50.0))
    await server.start()
    assert server.grpc_target is not None
    pool = tgis.TgisPool(server.grpc_target)
    sink = tgis.sink(stream=True)
    body = {"requests": [{"text": "a"}], "params": {"stopping": {"max_new_tokens": 100}}}
    call = asyncio.ensure_future(pool.send(tgis.encode(body, stream=True), sink, 10))
    for _ in range(500):  # the first token is written 50 ms in
        if sink.response.chunks:
            break
        await asyncio.sleep(0.01)
    async with asyncio.timeout(5):
        await server.stop()
        await call
    await pool.aclose()
    assert not sink.response.ok
    assert 0 < len(sink.response.chunks) < 100
    assert server.metrics.running == 0


async def test_malformed_fault_sends_a_message_no_decoder_takes() -> None:
    async with SimServer(SimParams(protocols=("tgis",), faults={"malformed_rate": 1.0})) as server:
        assert server.grpc_target is not None
        pool = tgis.TgisPool(server.grpc_target)
        sink = tgis.sink(stream=True)
        try:
            body = {"requests": [{"text": "a"}], "params": {"stopping": {"max_new_tokens": 8}}}
            await pool.send(tgis.encode(body, stream=True), sink, 5)
        finally:
            await pool.aclose()
    assert not sink.response.ok
    assert (
        "decode" in str(sink.response.error).lower() or "parse" in str(sink.response.error).lower()
    ), sink.response.error


class _RawClient:
    """HTTP/2 by hand: what a peer with a small window sees, frame by frame."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.decoder = Decoder()

    async def frame(self) -> tuple[int, int, int, bytes]:
        async with asyncio.timeout(5):
            head = await self.reader.readexactly(9)
            length = int.from_bytes(head[:3], "big")
            payload = await self.reader.readexactly(length)
        return head[3], head[4], int.from_bytes(head[5:], "big") & 0x7FFFFFFF, payload


async def test_the_clients_window_is_respected() -> None:
    window = 40  # bytes: a 30-token answer needs several grants
    async with SimServer(SimParams(protocols=("tgis",))) as server:
        host, port = (server.grpc_target or "").rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        peer = _RawClient(reader, writer)
        message = _request(30, min_new_tokens=30).SerializeToString()
        block = w.request_block("/fmaas.GenerationService/GenerateStream", "sim")
        writer.write(
            w.PREFACE
            + w.settings({w.INITIAL_WINDOW_SIZE: window})
            + w.header_frames(1, block, w.DEFAULT_FRAME, end_stream=False)
            + w.frame(w.DATA, w.END_STREAM, 1, b"\0" + len(message).to_bytes(4, "big") + message)
        )
        received, granted, grants, trailers = 0, window, 0, {}
        while not trailers:
            kind, flags, _sid, payload = await peer.frame()
            if kind == w.DATA:
                received += len(payload)
                assert received <= granted, "the server sent past the client's window"
                if received == granted:  # stalled until the client grants more
                    writer.write(w.window_update(1, window))
                    granted += window
                    grants += 1
            elif kind == w.HEADERS:
                fields = dict(peer.decoder.decode(payload))
                if flags & w.END_STREAM:
                    trailers = fields
        writer.close()
    assert trailers["grpc-status"] == "0"
    assert grants >= 3
    assert received > 30 * 5  # 31 length-prefixed messages


async def test_what_is_not_grpc_is_refused() -> None:
    async with SimServer(SimParams(protocols=("tgis",))) as server:
        host, port = (server.grpc_target or "").rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        async with asyncio.timeout(5):
            http1 = await reader.read()  # GOAWAY, then closed
        writer.close()
        reader, writer = await asyncio.open_connection(host, int(port))
        peer = _RawClient(reader, writer)
        block = w.request_block("/fmaas.GenerationService/ModelInfo", "sim")
        block = block.replace(b"application/grpc", b"application/json")
        writer.write(w.PREFACE + w.settings({}) + w.header_frames(1, block, 16384, end_stream=True))
        status = None
        while status is None:
            kind, _flags, _sid, payload = await peer.frame()
            if kind == w.HEADERS:
                status = dict(peer.decoder.decode(payload))[":status"]
        writer.close()
    frames, pos = [], 0
    while pos + 9 <= len(http1):
        end = pos + 9 + int.from_bytes(http1[pos : pos + 3], "big")
        frames.append((http1[pos + 3], http1[pos + 9 : end]))
        pos = end
    assert [kind for kind, _ in frames][-1] == w.GOAWAY  # after the server's SETTINGS
    assert int.from_bytes(frames[-1][1][4:8], "big") == w.PROTOCOL_ERROR
    assert status == "415"


async def test_the_server_ends_a_call_at_its_grpc_timeout() -> None:
    """A client that sends ``grpc-timeout`` and never resets: the server ends the call."""
    async with SimServer(SimParams(protocols=("tgis",), itl_ms=50.0)) as server:
        host, port = (server.grpc_target or "").rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        peer = _RawClient(reader, writer)
        message = _request(40, min_new_tokens=40).SerializeToString()
        path = "/fmaas.GenerationService/GenerateStream"
        block = w.request_block(path, "sim") + w.timeout_field(0.2)
        writer.write(
            w.PREFACE
            + w.settings({})
            + w.header_frames(1, block, w.DEFAULT_FRAME, end_stream=False)
            + w.frame(w.DATA, w.END_STREAM, 1, b"\0" + len(message).to_bytes(4, "big") + message)
        )
        trailers: dict[str, str] = {}
        while not trailers:
            kind, flags, _sid, payload = await peer.frame()
            if kind == w.HEADERS:
                fields = dict(peer.decoder.decode(payload))
                if flags & w.END_STREAM:
                    trailers = fields
        await asyncio.sleep(0.05)
        running = server.metrics.running
        writer.close()
    assert trailers["grpc-status"] == str(w.GRPC_CODES.index("DEADLINE_EXCEEDED"))
    assert running == 0


async def test_a_continuation_flood_ends_the_connection() -> None:
    """A header block that never ends (HEADERS, then CONTINUATIONs past 64 KiB) is not
    kept growing: GOAWAY ENHANCE_YOUR_CALM, and the server still serves a new connection."""
    async with SimServer(SimParams(protocols=("tgis",))) as server:
        host, port = (server.grpc_target or "").rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        peer = _RawClient(reader, writer)
        block = w.request_block("/fmaas.GenerationService/ModelInfo", "sim")
        writer.write(w.PREFACE + w.settings({}) + w.frame(w.HEADERS, 0, 1, block))
        for _ in range(5):
            writer.write(w.frame(w.CONTINUATION, 0, 1, b"\x40" * w.DEFAULT_FRAME))
        kind, payload = 0, b""
        while kind != w.GOAWAY:
            kind, _flags, _sid, payload = await peer.frame()
        writer.close()
        async with grpc.aio.insecure_channel(server.grpc_target or "") as channel:
            info = await pbg.GenerationServiceStub(channel).ModelInfo(pb.ModelInfoRequest())
    assert int.from_bytes(payload[4:8], "big") == w.ENHANCE_YOUR_CALM
    assert b"header block over 65536 bytes" in payload[8:]
    assert info.max_sequence_length > 0
