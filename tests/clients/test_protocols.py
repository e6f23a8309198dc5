"""OpenAI and TGI clients against the scripted fake server over real sockets."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from testbed.clients import openai, tgi
from testbed.clients.http import ConnectionPool
from testbed.clients.response import Response


def run(fake: Any, scenario: Any, **options: Any) -> Any:
    async def main() -> Any:
        async with fake(**options) as server:
            pool = ConnectionPool(server.url)
            try:
                return await scenario(pool, server)
            finally:
                await pool.aclose()

    return asyncio.run(main())


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_openai_stream(fake: Any, api: openai.Api) -> None:
    async def scenario(pool: ConnectionPool, server: Any) -> Response:
        request: dict[str, Any] = {"model": "m", "max_tokens": 5}
        request["prompt" if api == "completions" else "messages"] = "hi"
        response = await openai.complete(pool, request, api=api, keep_raw=True)
        assert server.requests[0]["body"]["stream_options"] == {"include_usage": True}
        assert server.requests[0]["path"] == openai.PATHS[api]
        return response

    response = run(fake, scenario, itl_s=0.002)
    assert response.ok
    assert response.text == " w0 w1 w2 w3 w4"
    assert [text for _, text in response.chunks] == [" w0", " w1", " w2", " w3", " w4"]
    times = [t for t, _ in response.chunks]
    assert times == sorted(times)
    assert times[-1] - times[0] >= 4 * 2_000_000 * 0.9
    assert response.t_sent_ns < response.t_first_byte_ns <= times[0] <= response.t_done_ns
    assert response.usage == {"prompt_tokens": 3, "completion_tokens": 5}
    assert response.finish_reason == "length"
    assert len(response.raw) == 6  # five content chunks and the usage chunk


@pytest.mark.parametrize("keep_raw", [False, True])
def test_openai_unary(fake: Any, keep_raw: bool) -> None:
    async def scenario(pool: ConnectionPool, server: Any) -> Response:
        request = {"prompt": "x", "max_tokens": 3}
        return await openai.complete(pool, request, stream=False, keep_raw=keep_raw)

    response = run(fake, scenario)
    assert response.text == " w0 w1 w2"
    assert response.usage == {
        "prompt_tokens": 3,
        "completion_tokens": 3,
    }
    # the body is kept only when asked
    assert len(response.raw) == (1 if keep_raw else 0)
    assert response.finish_reason == "length"
    if keep_raw:
        assert response.raw[0]["choices"][0]["finish_reason"] == "length"


def test_keep_alive_reuses_one_connection(fake: Any) -> None:
    async def scenario(pool: ConnectionPool, server: Any) -> int:
        for _ in range(5):
            assert (await openai.complete(pool, {"prompt": "x"})).ok
        return int(server.connections)

    assert run(fake, scenario) == 1


def test_server_closing_idle_connections_is_retried(fake: Any) -> None:
    async def scenario(pool: ConnectionPool, server: Any) -> int:
        for _ in range(3):
            assert (await openai.complete(pool, {"prompt": "x"})).ok
        return int(server.connections)

    assert run(fake, scenario, fault="close_after_response") == 3


def test_http_error_status_becomes_response_error(fake: Any) -> None:
    async def scenario(pool: ConnectionPool, server: Any) -> Response:
        return await openai.complete(pool, {"prompt": "x"})

    response = run(fake, scenario, fault="500")
    assert not response.ok
    assert response.error is not None
    assert response.error.startswith("HTTP 500")
    assert "boom" in response.error


def test_connection_lost_mid_stream_is_the_responses_error(fake: Any) -> None:
    """The server answered, then reset the connection: the answer it began is cut short."""

    async def scenario(pool: ConnectionPool, server: Any) -> Response:
        return await openai.complete(pool, {"prompt": "x", "max_tokens": 10})

    response = run(fake, scenario, fault="close_mid_stream", itl_s=0.001)
    assert not response.ok
    assert response.error is not None
    assert response.error.startswith("stream cut short: the connection closed mid-body")
    assert "chunked body without its last chunk" in response.error
    assert "after 5 text chunks, without data: [DONE]" in response.error
    assert len(response.chunks) == 5


def test_discover_model(fake: Any) -> None:
    async def scenario(pool: ConnectionPool, server: Any) -> Any:
        return await openai.discover_model(pool)

    assert run(fake, scenario) == "fake-model"


@pytest.mark.parametrize("stream", [True, False])
def test_tgi(fake: Any, stream: bool) -> None:
    async def scenario(pool: ConnectionPool, server: Any) -> Response:
        response = await tgi.generate(
            pool, {"inputs": "hi", "parameters": {"max_new_tokens": 4}}, stream=stream
        )
        assert server.requests[0]["body"]["parameters"]["details"] is True
        return response

    response = run(fake, scenario)
    assert response.text == " w0 w1 w2 w3"
    assert len(response.chunks) == (4 if stream else 1)
    assert response.usage == {"completion_tokens": 4}
    assert response.finish_reason == "length"


def test_warm_connections_are_used_and_connect_time_is_apart(fake: Any) -> None:
    async def scenario(pool: ConnectionPool, server: Any) -> tuple[int, list[int]]:
        await pool.warm(3)
        responses = await asyncio.gather(
            *(openai.complete(pool, {"prompt": "x"}) for _ in range(4))
        )
        return int(server.connections), sorted(r.connect_ns for r in responses)

    connections, connect = run(fake, scenario, itl_s=0.001)
    assert connections == 4  # three warmed, one opened for the fourth request in flight
    assert connect[:3] == [0, 0, 0]
    assert connect[3] > 0
