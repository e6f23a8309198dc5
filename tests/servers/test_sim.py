"""The simulator's protocols, determinism, faults and admission, over real loopback HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import socket
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import pytest

from testbed.config.sim import SimParams
from testbed.servers.sim import SimServer, running_sim, serve_in_thread
from testbed.servers.sim.text import count_tokens

PROMPT = "the quick brown fox jumps over the lazy dog"


# -- a tiny HTTP client (the project's own clients live elsewhere; this one sees raw bytes) --
@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes
    complete: bool = True  # False when the server cut the stream
    chunks: list[bytes] = field(default_factory=list)

    def json(self) -> Any:
        return json.loads(self.body)

    def events(self) -> list[str]:
        """Server-sent event payloads (after ``data:``), in order."""
        out = []
        for block in self.body.decode().split("\n\n"):
            if block.startswith("data:"):
                out.append(block[5:].strip())
        return out


def _request_bytes(method: str, path: str, body: Any = None) -> bytes:
    data = b"" if body is None else json.dumps(body).encode()
    head = f"{method} {path} HTTP/1.1\r\nhost: sim\r\ncontent-length: {len(data)}\r\n\r\n"
    return head.encode() + data


async def _read_reply(reader: asyncio.StreamReader) -> Reply:
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
    lines = head.split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding") == "chunked":
        chunks: list[bytes] = []
        try:
            while True:
                size = int((await reader.readuntil(b"\r\n")).strip(), 16)
                data = await reader.readexactly(size + 2)
                if size == 0:
                    break
                chunks.append(data[:-2])
        except (asyncio.IncompleteReadError, ConnectionError):
            return Reply(status, headers, b"".join(chunks), complete=False, chunks=chunks)
        return Reply(status, headers, b"".join(chunks), chunks=chunks)
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Reply(status, headers, body)


async def call(url: str, method: str, path: str, body: Any = None) -> Reply:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(_request_bytes(method, path, body))
        return await _read_reply(reader)
    finally:
        writer.close()


def post(url: str, path: str, body: Any) -> Reply:
    return asyncio.run(call(url, "POST", path, body))


def run(params: SimParams, scenario: Any) -> Any:
    """Run ``scenario(url)`` (a coroutine function) against a fresh simulator."""

    async def main() -> Any:
        async with running_sim(params) as url:
            return await scenario(url)

    return asyncio.run(main())


def metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in /metrics")


@pytest.fixture(scope="module")
def sim_url() -> Any:
    with serve_in_thread(SimParams()) as url:
        yield url


# -- OpenAI completions ----------------------------------------------------------------------
def test_completion_non_stream_reports_usage(sim_url: str) -> None:
    reply = post(sim_url, "/v1/completions", {"prompt": PROMPT, "max_tokens": 7})
    assert reply.status == 200
    data = reply.json()
    choice = data["choices"][0]
    assert data["object"] == "text_completion"
    assert data["model"] == "sim-model"
    assert choice["finish_reason"] == "length"
    assert count_tokens(choice["text"], "whitespace") == 7
    assert data["usage"] == {"prompt_tokens": 9, "completion_tokens": 7, "total_tokens": 16}


def test_completion_stream_matches_non_stream(sim_url: str) -> None:
    body = {"prompt": PROMPT, "max_tokens": 5}
    whole = post(sim_url, "/v1/completions", body).json()["choices"][0]["text"]
    reply = post(sim_url, "/v1/completions", {**body, "stream": True})
    assert reply.status == 200
    assert reply.headers["content-type"] == "text/event-stream"
    events = reply.events()
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert len(chunks) == 5  # no usage chunk unless asked for
    assert all(c["choices"][0]["logprobs"] is None for c in chunks)
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None] * 4 + ["length"]
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole
    assert len({c["id"] for c in chunks}) == 1


def test_include_usage_adds_a_usage_chunk(sim_url: str) -> None:
    reply = post(
        sim_url,
        "/v1/completions",
        {
            "prompt": PROMPT,
            "max_tokens": 4,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    )
    events = reply.events()
    usage = json.loads(events[-2])
    assert events[-1] == "[DONE]"
    assert usage["choices"] == []
    assert usage["usage"] == {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}


def test_prompt_as_token_ids_counts_ids(sim_url: str) -> None:
    reply = post(sim_url, "/v1/completions", {"prompt": [1, 2, 3, 4], "max_tokens": 2})
    assert reply.json()["usage"]["prompt_tokens"] == 4


# -- OpenAI chat ---------------------------------------------------------------------------
def test_chat_stream_and_non_stream_agree(sim_url: str) -> None:
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": PROMPT}]
    body = {"messages": messages, "max_tokens": 6}
    whole = post(sim_url, "/v1/chat/completions", body).json()
    assert whole["object"] == "chat.completion"
    assert whole["choices"][0]["message"]["role"] == "assistant"
    assert whole["usage"]["prompt_tokens"] == 2 + 9
    text = whole["choices"][0]["message"]["content"]
    stream = post(
        sim_url,
        "/v1/chat/completions",
        {**body, "stream": True, "stream_options": {"include_usage": True}},
    )
    chunks = [json.loads(e) for e in stream.events()[:-2]]
    assert chunks[0]["object"] == "chat.completion.chunk"
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    deltas = [c["choices"][0]["delta"].get("content", "") for c in chunks[1:]]
    assert "".join(deltas) == text
    assert len(deltas) == 6
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert json.loads(stream.events()[-2])["usage"]["completion_tokens"] == 6


def test_a_one_token_chat_stream_finishes_on_its_token_not_on_the_role(sim_url: str) -> None:
    body = {"messages": [{"role": "user", "content": PROMPT}], "max_tokens": 1, "stream": True}
    chunks = [json.loads(e) for e in post(sim_url, "/v1/chat/completions", body).events()[:-1]]
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None, "length"]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}


def test_max_completion_tokens_is_honoured(sim_url: str) -> None:
    body = {"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 3}
    assert post(sim_url, "/v1/chat/completions", body).json()["usage"]["completion_tokens"] == 3


# -- TGI ---------------------------------------------------------------------------------
def test_tgi_generate_and_stream_agree(sim_url: str) -> None:
    body = {"inputs": PROMPT, "parameters": {"max_new_tokens": 5, "seed": 3}}
    whole = post(sim_url, "/generate", body).json()
    assert whole["details"] == {"finish_reason": "length", "generated_tokens": 5, "seed": 3}
    reply = post(sim_url, "/generate_stream", body)
    assert reply.body.startswith(b"data:{")
    events = [json.loads(e) for e in reply.events()]
    assert len(events) == 5
    assert all(e["token"]["special"] is False for e in events)
    assert [e["generated_text"] for e in events[:-1]] == [None] * 4
    assert events[-1]["generated_text"] == whole["generated_text"]
    assert "".join(e["token"]["text"] for e in events) == whole["generated_text"]
    assert events[-1]["details"]["generated_tokens"] == 5


def test_tgi_validation_error_is_422(sim_url: str) -> None:
    reply = post(sim_url, "/generate", {"inputs": 3})
    assert reply.status == 422
    assert reply.json()["error_type"] == "validation"


# -- tokenization agrees with usage ------------------------------------------------------------
@pytest.mark.parametrize("rule", ["whitespace", "chars4"])
def test_tokenize_agrees_with_usage(rule: str) -> None:
    async def scenario(url: str) -> None:
        tok = (await call(url, "POST", "/tokenize", {"prompt": PROMPT})).json()
        gen = (await call(url, "POST", "/v1/completions", {"prompt": PROMPT})).json()
        assert tok["count"] == len(tok["tokens"]) == gen["usage"]["prompt_tokens"]
        text = gen["choices"][0]["text"]
        assert count_tokens(text, rule) == gen["usage"]["completion_tokens"] == 64
        retok = (await call(url, "POST", "/tokenize", {"prompt": text})).json()
        assert retok["count"] == 64
        messages = [{"role": "user", "content": PROMPT}, {"role": "user", "content": "a b"}]
        chat_tok = (await call(url, "POST", "/tokenize", {"messages": messages})).json()
        chat = (await call(url, "POST", "/v1/chat/completions", {"messages": messages})).json()
        assert chat_tok["count"] == chat["usage"]["prompt_tokens"]

    run(SimParams(tokenizer=rule), scenario)  # type: ignore[arg-type]


# -- determinism, eos, stop --------------------------------------------------------------------
def _text(url: str, **extra: Any) -> str:
    reply = post(url, "/v1/completions", {"prompt": PROMPT, "max_tokens": 12, **extra})
    return str(reply.json()["choices"][0]["text"])


def test_output_is_deterministic_per_seed(sim_url: str) -> None:
    first = _text(sim_url)
    assert _text(sim_url) == first
    assert _text(sim_url, seed=7) != first
    with serve_in_thread(SimParams()) as other:
        assert _text(other) == first  # another server, same seed: same text
    with serve_in_thread(SimParams(seed=1)) as other:
        assert _text(other) != first


def test_ignore_eos_gives_exactly_max_tokens() -> None:
    async def scenario(url: str) -> None:
        body = {"prompt": PROMPT, "max_tokens": 20}
        early = (await call(url, "POST", "/v1/completions", body)).json()
        full = (await call(url, "POST", "/v1/completions", {**body, "ignore_eos": True})).json()
        assert early["choices"][0]["finish_reason"] == "stop"
        assert 1 <= early["usage"]["completion_tokens"] < 20
        assert full["choices"][0]["finish_reason"] == "length"
        assert full["usage"]["completion_tokens"] == 20
        assert full["choices"][0]["text"].startswith(early["choices"][0]["text"])

    run(SimParams(eos_rate=1.0), scenario)


def test_stop_sequence_cuts_the_text(sim_url: str) -> None:
    full = _text(sim_url)
    third = full.split(" ")[3]
    cut = post(
        sim_url, "/v1/completions", {"prompt": PROMPT, "max_tokens": 12, "stop": [" " + third]}
    ).json()
    assert cut["choices"][0]["finish_reason"] == "stop"
    assert cut["choices"][0]["text"] == full[: full.index(" " + third)]
    assert cut["usage"]["completion_tokens"] == 2


# -- errors ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("path", "body", "status", "needle"),
    [
        ("/v1/completions", {"max_tokens": 3}, 400, "prompt"),
        ("/v1/completions", {"prompt": "x", "max_tokens": 0}, 400, "max_tokens"),
        ("/v1/completions", {"prompt": "x", "stream": "yes"}, 400, "stream"),
        ("/v1/completions", {"prompt": "x", "model": "other"}, 404, "other"),
        ("/v1/chat/completions", {"messages": []}, 400, "messages"),
    ],
)
def test_bad_requests_get_openai_errors(
    sim_url: str, path: str, body: Any, status: int, needle: str
) -> None:
    reply = post(sim_url, path, body)
    assert reply.status == status
    error = reply.json()["error"]
    assert needle in error["message"]
    assert error["code"] == status


def test_invalid_json_unknown_path_and_wrong_method(sim_url: str) -> None:
    async def scenario() -> None:
        host, port = sim_url.removeprefix("http://").rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(b"POST /v1/completions HTTP/1.1\r\ncontent-length: 3\r\n\r\n{x}")
        reply = await _read_reply(reader)
        assert reply.status == 400
        assert "JSON" in reply.json()["error"]["message"]
        writer.close()
        assert (await call(sim_url, "GET", "/nope")).status == 404
        assert (await call(sim_url, "GET", "/v1/completions")).status == 405

    asyncio.run(scenario())


def test_max_model_len_rejects_long_requests() -> None:
    async def scenario(url: str) -> None:
        reply = await call(url, "POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 2})
        assert reply.status == 400
        assert "maximum context length is 10" in reply.body.decode()
        ok = await call(url, "POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 1})
        assert ok.status == 200

    run(SimParams(max_model_len=10), scenario)


# -- the rest of the surface -------------------------------------------------------------------
def test_models_health_metrics_info(sim_url: str) -> None:
    async def scenario() -> None:
        models = (await call(sim_url, "GET", "/v1/models")).json()
        assert models["data"][0]["id"] == "sim-model"
        assert (await call(sim_url, "GET", "/health")).status == 200
        info = (await call(sim_url, "GET", "/info")).json()
        assert info["model_id"] == "sim-model"
        before = (await call(sim_url, "GET", "/metrics")).body.decode()
        await call(sim_url, "POST", "/v1/completions", {"prompt": "a b c", "max_tokens": 4})
        after = (await call(sim_url, "GET", "/metrics")).body.decode()
        for name, delta in (
            ("vllm:prompt_tokens_total", 3),
            ("vllm:generation_tokens_total", 4),
            ("vllm:time_to_first_token_seconds_count", 1),
            ("vllm:e2e_request_latency_seconds_count", 1),
        ):
            assert metric(after, name) - metric(before, name) == delta, name
        assert "# TYPE vllm:time_to_first_token_seconds histogram" in after
        assert metric(after, "vllm:num_requests_running") == 0

    asyncio.run(scenario())


def test_keep_alive_and_pipelining(sim_url: str) -> None:
    async def scenario() -> None:
        host, port = sim_url.removeprefix("http://").rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        first = {"prompt": "one", "max_tokens": 2, "stream": True}
        second = {"prompt": "two", "max_tokens": 3}
        writer.write(
            _request_bytes("POST", "/v1/completions", first)
            + _request_bytes("POST", "/v1/completions", second)
        )
        a, b = await _read_reply(reader), await _read_reply(reader)
        assert a.events()[-1] == "[DONE]"
        assert b.json()["usage"]["completion_tokens"] == 3
        writer.write(_request_bytes("GET", "/health"))
        assert (await _read_reply(reader)).status == 200  # same connection, still open
        writer.close()

    asyncio.run(scenario())


# -- faults ----------------------------------------------------------------------------------
def test_error_fault_answers_the_configured_status() -> None:
    async def scenario(url: str) -> None:
        reply = await call(url, "POST", "/v1/completions", {"prompt": "x"})
        assert reply.status == 503
        assert "injected" in reply.json()["error"]["message"]

    run(SimParams(faults={"error_rate": 1.0, "error_status": 503}), scenario)  # type: ignore[arg-type]


def test_disconnect_fault_cuts_the_stream() -> None:
    async def scenario(url: str) -> None:
        body = {"prompt": "x", "max_tokens": 10, "stream": True}
        reply = await call(url, "POST", "/v1/completions", body)
        assert reply.status == 200
        assert not reply.complete
        assert 0 < len(reply.events()) < 10
        assert "[DONE]" not in reply.events()

    run(SimParams(faults={"disconnect_rate": 1.0}), scenario)  # type: ignore[arg-type]


def test_malformed_fault_breaks_one_chunk() -> None:
    async def scenario(url: str) -> None:
        body = {"prompt": "x", "max_tokens": 10, "stream": True}
        events = (await call(url, "POST", "/v1/completions", body)).events()
        assert events[-1] == "[DONE]"
        broken = 0
        for event in events[:-1]:
            try:
                json.loads(event)
            except ValueError:
                broken += 1
        assert broken == 1

    run(SimParams(faults={"malformed_rate": 1.0}), scenario)  # type: ignore[arg-type]


def test_corrupt_fault_changes_the_answer_not_its_shape(sim_url: str) -> None:
    clean = _text(sim_url)

    async def scenario(url: str) -> None:
        body = {"prompt": PROMPT, "max_tokens": 12}
        data = (await call(url, "POST", "/v1/completions", body)).json()
        text = data["choices"][0]["text"]
        assert text != clean
        assert len(text) == len(clean)
        assert data["usage"]["completion_tokens"] == 12

    run(SimParams(faults={"corrupt_rate": 1.0}), scenario)  # type: ignore[arg-type]


def test_slow_start_holds_health_then_serves() -> None:
    async def scenario(url: str) -> None:
        assert (await call(url, "GET", "/health")).status == 503
        assert (await call(url, "POST", "/v1/completions", {"prompt": "x"})).status == 503
        deadline = time.monotonic() + 5
        while (await call(url, "GET", "/health")).status != 200:
            assert time.monotonic() < deadline, "never became ready"
            await asyncio.sleep(0.02)
        assert (await call(url, "POST", "/v1/completions", {"prompt": "x"})).status == 200

    run(SimParams(faults={"slow_start_s": 0.3}), scenario)  # type: ignore[arg-type]


# -- admission ------------------------------------------------------------------------------
async def _poll_metrics(url: str, want: dict[str, float]) -> str:
    deadline = time.monotonic() + 5.0
    while True:
        text = (await call(url, "GET", "/metrics")).body.decode()
        if all(metric(text, k) == v for k, v in want.items()):
            return text
        assert time.monotonic() < deadline, f"metrics never reached {want}:\n{text[:600]}"
        await asyncio.sleep(0.01)


def test_max_concurrency_queues_the_rest() -> None:
    async def scenario(url: str) -> None:
        body = {"prompt": "x", "max_tokens": 2, "stream": True}
        tasks = [asyncio.create_task(call(url, "POST", "/v1/completions", body)) for _ in range(5)]
        await _poll_metrics(url, {"vllm:num_requests_running": 2, "vllm:num_requests_waiting": 3})
        replies = await asyncio.gather(*tasks)
        assert all(r.events()[-1] == "[DONE]" for r in replies)
        text = await _poll_metrics(
            url, {"vllm:num_requests_running": 0, "vllm:num_requests_waiting": 0}
        )
        assert metric(text, "vllm:request_queue_time_seconds_count") == 5

    run(SimParams(max_concurrency=2, ttft_ms=300), scenario)


def test_full_queue_rejects_with_503() -> None:
    async def scenario(url: str) -> None:
        body = {"prompt": "x", "max_tokens": 1}
        tasks = [asyncio.create_task(call(url, "POST", "/v1/completions", body)) for _ in range(3)]
        statuses = sorted(r.status for r in await asyncio.gather(*tasks))
        assert statuses == [200, 200, 503]

    run(SimParams(max_concurrency=1, max_waiting=1, ttft_ms=100), scenario)


def test_client_leaving_frees_its_slot() -> None:
    async def scenario(url: str) -> None:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        _, writer = await asyncio.open_connection(host, int(port))
        body = {"prompt": "x", "max_tokens": 100, "stream": True}
        writer.write(_request_bytes("POST", "/v1/completions", body))
        await _poll_metrics(url, {"vllm:num_requests_running": 1})
        writer.close()
        text = await _poll_metrics(url, {"vllm:num_requests_running": 0})
        assert metric(text, "testbed_sim:requests_aborted_total") == 1

    run(SimParams(itl_ms=50), scenario)


def test_sim_server_exposes_metrics_and_url() -> None:
    async def scenario() -> None:
        async with SimServer(SimParams(model_name="m")) as server:
            assert server.url.startswith("http://127.0.0.1:")
            assert server.port > 0
            await call(server.url, "POST", "/v1/completions", {"prompt": "a", "max_tokens": 3})
            assert server.metrics.generation_tokens == 3

    asyncio.run(scenario())


@pytest.mark.parametrize("accepting_iterations", [0, 1, 2, 3])
async def test_stop_resets_connections_accepted_as_it_stops(accepting_iterations: int) -> None:
    """Clients queued at the listening socket when ``stop()`` is called are reset, and no
    socket leaks (Python 3.11 leaked one set up after ``Server.close()``): whichever loop
    iteration the accepts are in when stopping, here 2 was the leaking one."""
    server = SimServer()
    await server.start()
    clients = [socket.create_connection((server.host, server.port)) for _ in range(8)]
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(accepting_iterations):
                await asyncio.sleep(0)  # the loop accepts them; their set-up is under way
            await server.stop()
            gc.collect()
        assert [str(w.message) for w in caught if w.category is ResourceWarning] == []
        for client in clients:
            client.settimeout(5)
            with contextlib.suppress(ConnectionResetError):
                assert client.recv(1) == b""  # closed by the server, not left open
    finally:
        for client in clients:
            client.close()
