"""The TGIS gRPC client against the simulator's gRPC front door, and the schema itself.

The schema must stay wire-compatible with TGIS (``fmaas.GenerationService``): the service,
method and message names, every field's number and type are checked against the values of
IBM/text-generation-inference's proto/generation.proto; the committed Python modules must be
what grpcio-tools makes of the .proto today.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from testbed.clients import tgis
from testbed.clients.http_errors import ConnectError, ConnectTimeout, ReadTimeout
from testbed.config.sim import SimParams
from testbed.core.errors import InputError
from testbed.proto.fmaas import generation_pb2 as pb
from testbed.servers.sim.server import SimServer

PROTO = Path(__file__).parents[2] / "src" / "testbed" / "proto" / "fmaas"
TGIS = ("openai", "tgi", "tgis")

# (message, field, number, protobuf type) as TGIS defines them.
UPSTREAM = [
    ("BatchedGenerationRequest", "model_id", 1, "TYPE_STRING"),
    ("BatchedGenerationRequest", "prefix_id", 2, "TYPE_STRING"),
    ("BatchedGenerationRequest", "requests", 3, "TYPE_MESSAGE"),
    ("BatchedGenerationRequest", "params", 10, "TYPE_MESSAGE"),
    ("SingleGenerationRequest", "request", 3, "TYPE_MESSAGE"),
    ("SingleGenerationRequest", "params", 10, "TYPE_MESSAGE"),
    ("GenerationRequest", "text", 2, "TYPE_STRING"),
    ("GenerationResponse", "input_token_count", 6, "TYPE_UINT32"),
    ("GenerationResponse", "generated_token_count", 2, "TYPE_UINT32"),
    ("GenerationResponse", "text", 4, "TYPE_STRING"),
    ("GenerationResponse", "stop_reason", 7, "TYPE_ENUM"),
    ("GenerationResponse", "stop_sequence", 11, "TYPE_STRING"),
    ("GenerationResponse", "seed", 10, "TYPE_UINT64"),
    ("GenerationResponse", "tokens", 8, "TYPE_MESSAGE"),
    ("GenerationResponse", "input_tokens", 9, "TYPE_MESSAGE"),
    ("Parameters", "method", 1, "TYPE_ENUM"),
    ("Parameters", "sampling", 2, "TYPE_MESSAGE"),
    ("Parameters", "stopping", 3, "TYPE_MESSAGE"),
    ("Parameters", "response", 4, "TYPE_MESSAGE"),
    ("Parameters", "decoding", 5, "TYPE_MESSAGE"),
    ("Parameters", "truncate_input_tokens", 6, "TYPE_UINT32"),
    ("SamplingParameters", "temperature", 1, "TYPE_FLOAT"),
    ("SamplingParameters", "seed", 5, "TYPE_UINT64"),
    ("StoppingCriteria", "max_new_tokens", 1, "TYPE_UINT32"),
    ("StoppingCriteria", "min_new_tokens", 2, "TYPE_UINT32"),
    ("StoppingCriteria", "stop_sequences", 4, "TYPE_STRING"),
    ("ResponseOptions", "generated_tokens", 2, "TYPE_BOOL"),
    ("ResponseOptions", "token_logprobs", 4, "TYPE_BOOL"),
    ("ResponseOptions", "top_n_tokens", 6, "TYPE_UINT32"),
    ("TokenInfo", "text", 2, "TYPE_STRING"),
    ("TokenInfo", "logprob", 3, "TYPE_FLOAT"),
    ("TokenInfo", "top_tokens", 5, "TYPE_MESSAGE"),
    ("BatchedTokenizeRequest", "return_tokens", 3, "TYPE_BOOL"),
    ("TokenizeResponse", "token_count", 1, "TYPE_UINT32"),
    ("ModelInfoResponse", "max_sequence_length", 2, "TYPE_UINT32"),
]


@pytest.mark.parametrize(("message", "name", "number", "kind"), UPSTREAM)
def test_fields_match_tgis(message: str, name: str, number: int, kind: str) -> None:
    from google.protobuf.descriptor import FieldDescriptor

    field = pb.DESCRIPTOR.message_types_by_name[message].fields_by_name[name]
    assert field.number == number
    kinds = {v: k for k, v in vars(FieldDescriptor).items() if k.startswith("TYPE_")}
    assert kinds[field.type] == kind


def test_service_and_enums_match_tgis() -> None:
    service = pb.DESCRIPTOR.services_by_name["GenerationService"]
    assert service.full_name == "fmaas.GenerationService"
    assert [m.name for m in service.methods] == [
        "Generate",
        "GenerateStream",
        "Tokenize",
        "ModelInfo",
    ]
    assert service.methods_by_name["GenerateStream"].output_type.name == "GenerationResponse"
    reasons = pb.StopReason.keys()
    assert [pb.StopReason.Value(r) for r in reasons] == list(range(8))
    assert reasons[1:3] == ["MAX_TOKENS", "EOS_TOKEN"]


def test_committed_modules_are_generated_from_the_proto(tmp_path: Path) -> None:
    src = PROTO.parents[2]
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{src}", f"--python_out={tmp_path}",
         f"--pyi_out={tmp_path}", f"--grpc_python_out={tmp_path}",
         str(PROTO / "generation.proto")],
        check=True,
    )  # fmt: skip
    made = tmp_path / "testbed" / "proto" / "fmaas"
    for name in ("generation_pb2.py", "generation_pb2.pyi", "generation_pb2_grpc.py"):
        assert (made / name).read_text() == (PROTO / name).read_text(), f"run `make proto`: {name}"


def body(text: str = "one two three", tokens: int = 5, **params: Any) -> dict[str, Any]:
    return {
        "model_id": "sim-model",
        "requests": [{"text": text}],
        "params": {"stopping": {"max_new_tokens": tokens}, **params},
    }


async def test_stream_and_unary_fill_one_response_shape() -> None:
    async with SimServer(SimParams(protocols=TGIS, itl_ms=1.0)) as server:
        assert server.grpc_target is not None
        pool = tgis.TgisPool(server.grpc_target)
        try:
            streamed = tgis.sink(stream=True, keep_raw=True)
            await pool.send(tgis.encode(body(), stream=True), streamed, 5.0)
            whole = tgis.sink(stream=False)
            await pool.send(tgis.encode(body(), stream=False), whole, 5.0)
        finally:
            await pool.aclose()
    s, w = streamed.response, whole.response
    assert s.ok
    assert w.ok
    assert s.text == w.text != ""
    assert len(s.chunks) == 5  # one per token; the first message (input count) has no text
    assert len(w.chunks) == 1
    assert s.usage == w.usage == {"prompt_tokens": 3, "completion_tokens": 5}
    assert s.finish_reason == w.finish_reason == "length"
    assert s.t_sent_ns < s.t_first_byte_ns <= s.chunks[0][0] < s.chunks[-1][0] <= s.t_done_ns
    assert s.raw[0]["input_token_count"] == 3
    assert s.raw[0]["text"] == ""
    assert s.raw[-1]["stop_reason"] == "MAX_TOKENS"


async def test_a_refusal_is_a_response_error_and_unreachable_raises() -> None:
    async with SimServer(SimParams(protocols=TGIS)) as server:
        target = server.grpc_target
        assert target is not None
        pool = tgis.TgisPool(target)
        try:
            refused = tgis.sink(stream=True)
            await pool.send(tgis.encode(body(tokens=5000), stream=True), refused, 5.0)
            tokens = await pool.tokenize(["a b c"], return_tokens=True)
            info = await pool.model_info()
        finally:
            await pool.aclose()
    assert refused.response.status == 400
    assert refused.response.error is not None
    assert refused.response.error.startswith("gRPC INVALID_ARGUMENT: max_new_tokens")
    assert tokens.responses[0].token_count == 3
    assert list(tokens.responses[0].tokens) == ["a", "b", "c"]
    assert info.max_sequence_length == 8192
    gone = tgis.TgisPool(target)  # the server has stopped
    try:
        with pytest.raises(ConnectError, match="cannot connect"):
            await gone.send(tgis.encode(body(), stream=True), tgis.sink(stream=True), 5.0)
    finally:
        await gone.aclose()


async def test_a_deadline_raises_timeout() -> None:
    async with SimServer(SimParams(protocols=TGIS, ttft_ms=2000.0)) as server:
        assert server.grpc_target is not None
        pool = tgis.TgisPool(server.grpc_target)
        try:
            with pytest.raises(ReadTimeout):
                await pool.send(tgis.encode(body(), stream=True), tgis.sink(stream=True), 0.2)
        finally:
            await pool.aclose()
        # The client reset the stream (RST_STREAM, then the connection closed); grpcio's
        # server hands the cancellation to the handler from its own thread, a moment later.
        for _ in range(500):
            if server.metrics.running == 0:
                break
            await asyncio.sleep(0.01)
        assert server.metrics.running == 0  # the cancelled call freed its slot


async def test_warming_a_channel_nothing_answers_gives_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """gRPC itself retries a channel forever; a load stage stops waiting and says why."""
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    monkeypatch.setattr(tgis, "CONNECT_TIMEOUT_S", 0.5)
    pool = tgis.TgisPool(f"127.0.0.1:{port}")
    try:
        with pytest.raises(ConnectTimeout, match=r"no gRPC connection within 0.5 s"):
            await pool.warm(1)
    finally:
        await pool.aclose()


def test_requests_in_proto_field_names() -> None:
    single = tgis.request_message(body("hi", 7, method="SAMPLE"), stream=True)
    assert single.request.text == "hi"
    assert single.params.stopping.max_new_tokens == 7
    assert single.params.method == pb.SAMPLE
    with pytest.raises(InputError, match="not a TGIS generation request"):
        tgis.encode({"requests": [{"text": "x"}], "params": {"temperature": 1}}, stream=False)
