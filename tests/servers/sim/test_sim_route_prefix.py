"""The simulator's OpenAI routes under a prefix (``openai_prefix``), as KServe's model server
serves them under ``/openai``: generation, ``/v1/models`` and ``/tokenize`` move; the root
ones answer 404; ``/health`` and ``/metrics`` stay where a kubelet and Prometheus look."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import ValidationError

from testbed.config.sim import SimParams
from testbed.servers.sim import running_sim


async def _call(url: str, method: str, path: str, body: object = None) -> tuple[int, bytes]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    data = b"" if body is None else json.dumps(body).encode()
    head = (
        f"{method} {path} HTTP/1.1\r\nhost: sim\r\ncontent-length: {len(data)}\r\n"
        "connection: close\r\n\r\n"
    )
    writer.write(head.encode() + data)
    raw = await reader.read()
    writer.close()
    return int(raw.split(b" ", 2)[1]), raw.split(b"\r\n\r\n", 1)[1]


async def test_openai_routes_live_under_the_prefix() -> None:
    params = SimParams(model_name="qwen", openai_prefix="/openai")
    completion = {"model": "qwen", "prompt": "a b c", "max_tokens": 3}
    chat = {"model": "qwen", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    async with running_sim(params) as url:
        status, body = await _call(url, "POST", "/openai/v1/completions", completion)
        assert status == 200, body
        assert json.loads(body)["usage"]["completion_tokens"] == 3
        status, body = await _call(url, "POST", "/openai/v1/chat/completions", chat)
        assert status == 200, body
        status, body = await _call(url, "GET", "/openai/v1/models")
        assert [m["id"] for m in json.loads(body)["data"]] == ["qwen"]
        status, body = await _call(url, "POST", "/openai/tokenize", {"prompt": "a b c d"})
        assert json.loads(body)["count"] == 4
        # Not at the root: a client written for vLLM's routes gets KServe's 404.
        assert (await _call(url, "POST", "/v1/completions", completion))[0] == 404
        assert (await _call(url, "GET", "/v1/models"))[0] == 404
        assert (await _call(url, "GET", "/health"))[0] == 200
        assert (await _call(url, "GET", "/metrics"))[0] == 200


async def test_without_a_prefix_the_routes_are_at_the_root() -> None:
    async with running_sim(SimParams()) as url:
        assert (await _call(url, "GET", "/v1/models"))[0] == 200
        assert (await _call(url, "GET", "/openai/v1/models"))[0] == 404


@pytest.mark.parametrize("bad", ["openai", "/openai/", "/a b", "//x"])
def test_a_prefix_is_a_path_without_a_trailing_slash(bad: str) -> None:
    with pytest.raises(ValidationError, match="openai_prefix"):
        SimParams(openai_prefix=bad)
