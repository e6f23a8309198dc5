"""The simulator's /v1/embeddings and /v1/responses: vLLM's shapes, its known latency, and
what it refuses."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

from testbed.clients import embeddings, responses
from testbed.clients.http import ConnectionPool
from testbed.config.sim import SimParams
from testbed.servers.sim import running_sim


async def _raw(url: str, path: str, body: Any) -> tuple[int, bytes]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    data = json.dumps(body).encode()
    head = f"POST {path} HTTP/1.1\r\nhost: sim\r\ncontent-length: {len(data)}\r\nconnection: close"
    writer.write(head.encode() + b"\r\n\r\n" + data)
    raw = await reader.read()
    writer.close()
    return int(raw.split(b" ", 2)[1]), raw.split(b"\r\n\r\n", 1)[1]


def _dechunk(raw: bytes) -> str:
    """An HTTP/1.1 chunked body's data."""
    out, rest = [], raw
    while rest:
        size, _, rest = rest.partition(b"\r\n")
        n = int(size, 16)
        if n == 0:
            break
        out.append(rest[:n])
        rest = rest[n + 2 :]
    return b"".join(out).decode()


async def test_embeddings_come_after_their_known_latency_one_per_input() -> None:
    params = SimParams(embedding_ms=30, embedding_per_token_ms=2, embedding_dimensions=16)
    async with running_sim(params) as url:
        pool = ConnectionPool(url)
        body = embeddings.request_body(["a b c", "d e", "a b c"], "sim-model", dimensions=8)
        response, got = await embeddings.embed(pool, body, timeout_s=5)
        b64 = embeddings.request_body(["a b c"], "sim-model", encoding_format="base64")
        _, packed = await embeddings.embed(pool, b64, timeout_s=5)
        await pool.aclose()
    assert response.ok, response.error
    assert response.usage == {"prompt_tokens": 8, "total_tokens": 8, "completion_tokens": 0}
    assert (response.t_done_ns - response.t_sent_ns) / 1e6 >= 30 + 2 * 8  # ms
    assert got.dimensions == 8
    assert len(got.vectors) == 3
    assert got.vectors[0] == got.vectors[2] != got.vectors[1]  # keyed on the input
    assert math.isclose(math.fsum(v * v for v in got.vectors[1]), 1.0, rel_tol=1e-5)
    # base64 carries the full vector; the shortened one is its start, renormalised
    full = packed.vectors[0]
    norm = math.sqrt(math.fsum(v * v for v in full[:8]))
    assert packed.dimensions == 16
    assert all(
        math.isclose(a, b / norm, rel_tol=1e-5)
        for a, b in zip(got.vectors[0], full[:8], strict=False)
    )


async def test_embeddings_refuse_what_vllm_refuses() -> None:
    async with running_sim(SimParams(embedding_dimensions=16, max_model_len=4)) as url:
        too_long = await _raw(url, "/v1/embeddings", {"input": "a b c d e"})
        too_wide = await _raw(url, "/v1/embeddings", {"input": "a", "dimensions": 17})
        empty = await _raw(url, "/v1/embeddings", {"input": []})
        other = await _raw(url, "/v1/embeddings", {"input": "a", "model": "nope"})
    assert too_long[0] == 400
    assert b"maximum context length is 4" in too_long[1]
    assert too_wide[0] == 400
    assert b"dimensions 17 is more than the model's 16" in too_wide[1]
    assert empty[0] == 400
    assert other[0] == 404


async def test_a_responses_stream_is_vllms_event_sequence_with_chats_timing() -> None:
    async with running_sim(SimParams(ttft_ms=40, itl_ms=10)) as url:
        status, raw = await _raw(
            url,
            "/v1/responses",
            {**responses.request_body("a b c", "sim-model", 3), "stream": True},
        )
        pool = ConnectionPool(url)
        answer = await responses.respond(
            pool, responses.request_body("a b c", "sim-model", 3), timeout_s=5
        )
        await pool.aclose()
    events = [block.split("\n") for block in _dechunk(raw).split("\n\n") if "data: " in block]
    types = [lines[0].removeprefix("event: ") for lines in events]
    datas = [json.loads(lines[1].removeprefix("data: ")) for lines in events]
    assert status == 200
    assert types == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * 3,
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [d["type"] for d in datas] == types
    assert [d["sequence_number"] for d in datas] == list(range(len(types)))
    done = datas[-1]["response"]
    assert done["status"] == "incomplete"  # stopped by max_output_tokens, as vLLM says it
    assert done["incomplete_details"] == {"reason": "max_output_tokens"}
    assert done["usage"]["input_tokens"] == 3
    assert done["usage"]["output_tokens"] == 3
    assert answer.ok, answer.error
    assert answer.ttft_ns is not None
    assert answer.ttft_ns / 1e6 >= 40
    # each token's deadline is TTFT + ITL × its place: a late write may join two, never early
    assert (answer.chunks[-1][0] - answer.t_sent_ns) / 1e6 >= 40 + 2 * 10


async def test_without_openai_neither_route_is_served() -> None:
    async with running_sim(SimParams(protocols=("tgi",))) as url:
        assert (await _raw(url, "/v1/embeddings", {"input": "a"}))[0] == 404
        assert (await _raw(url, "/v1/responses", {"input": "a"}))[0] == 404
