"""An answer cut short is the response's error, in every client (issue 26).

Each protocol client against the hostile server (tests/fixtures/hostile.py) cutting each way:
close-delimited, chunked, mid-event, after the last token but before the terminator, a
complete stream without a finish reason; the same server not cutting (``ok``) is the
control that proves the checks do not refuse a good answer.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from testbed.clients import openai, tgi, tgis
from testbed.clients.http import ConnectionPool
from testbed.clients.response import Response
from tests.fixtures.hostile import SENT, TOKENS, HostileServer, hostile_server

#: cut → (text chunks that arrive, words in the error) for a stream.
STREAM_CUTS = {
    "close": (SENT, "the server closed the connection after 3 text chunks"),
    "chunked": (SENT, "the connection closed mid-body (chunked body without its last chunk)"),
    "mid_event": (SENT, "the server closed the connection inside an unfinished event"),
    "before_done": (TOKENS, "the server closed the connection after 8 text chunks"),
    "chunked_before_done": (TOKENS, "the stream ended after 8 text chunks"),
}
UNARY_CUTS = {
    "close": "undecodable response body (the server closed the connection inside it?)",
    "chunked": "response body cut short: the connection closed mid-body (chunked body",
    "mid_event": "bytes of its Content-Length missing",
    "before_done": "answer without a finish reason",
    "no_finish": "answer without a finish reason",
}


@pytest.fixture(scope="module")
def server() -> Any:
    with hostile_server("ok", grpc=True) as hostile:
        yield hostile


def send(server: HostileServer, cut: str, api: str, *, stream: bool = True) -> Response:
    server.cut = cut

    async def main() -> Response:
        pool = ConnectionPool(server.url)
        try:
            if api == "tgi":
                body = {"inputs": "hi", "parameters": {"max_new_tokens": TOKENS}}
                return await tgi.generate(pool, body, stream=stream, timeout_s=10)
            request: dict[str, Any] = {"model": "m", "max_tokens": TOKENS}
            request["prompt" if api == "completions" else "messages"] = "hi"
            chosen: openai.Api = "chat" if api == "chat" else "completions"
            return await openai.complete(pool, request, api=chosen, stream=stream, timeout_s=10)
        finally:
            await pool.aclose()

    return asyncio.run(main())


@pytest.mark.parametrize("api", ["completions", "chat", "tgi"])
@pytest.mark.parametrize("stream", [True, False])
def test_a_whole_answer_is_ok(server: HostileServer, api: str, stream: bool) -> None:
    response = send(server, "ok", api, stream=stream)
    assert response.ok, response.error
    assert response.text == " w0 w1 w2 w3 w4 w5 w6 w7"
    assert response.finish_reason == "length"


@pytest.mark.parametrize("api", ["completions", "chat", "tgi"])
@pytest.mark.parametrize("cut", sorted(STREAM_CUTS))
def test_a_stream_cut_short_is_an_error(server: HostileServer, api: str, cut: str) -> None:
    response = send(server, cut, api)
    chunks, words = STREAM_CUTS[cut]
    assert not response.ok
    assert response.status == 200  # the server answered: its error, not the connection's
    assert response.error is not None
    assert response.error.startswith("stream cut short: "), response.error
    assert words in response.error
    marker = "the final event" if api == "tgi" else "without data: [DONE]"
    assert marker in response.error
    assert len(response.chunks) == chunks  # what did arrive is kept, with its times
    assert response.t_done_ns >= response.chunks[-1][0]


@pytest.mark.parametrize("api", ["completions", "chat", "tgi"])
def test_a_stream_without_a_finish_reason_is_an_error(server: HostileServer, api: str) -> None:
    response = send(server, "no_finish", api)
    assert response.error is not None
    assert len(response.chunks) == TOKENS
    if api == "tgi":  # its details were asked for, and lack the finish reason
        assert response.error.startswith("details without a finish_reason")
    else:
        assert (
            response.error
            == "stream without a finish reason: data: [DONE] came after 8 text chunks"
        )


@pytest.mark.parametrize("api", ["completions", "chat", "tgi"])
@pytest.mark.parametrize("cut", sorted(UNARY_CUTS))
def test_a_unary_answer_cut_short_is_an_error(server: HostileServer, api: str, cut: str) -> None:
    response = send(server, cut, api, stream=False)
    assert not response.ok
    assert response.error is not None
    if api == "tgi" and cut in ("before_done", "no_finish"):  # TGI's details say it
        assert response.error.startswith("details without a finish_reason")
    else:
        assert UNARY_CUTS[cut] in response.error, response.error


def send_tgis(server: HostileServer, cut: str, *, stream: bool) -> Response:
    server.cut = cut

    async def main() -> Response:
        pool = tgis.TgisPool(server.grpc_target)
        body = {"requests": [{"text": "hi"}], "params": {"stopping": {"max_new_tokens": TOKENS}}}
        sink = tgis.sink(stream=stream)
        try:
            await pool.send(tgis.encode(body, stream=stream), sink, 10)
        finally:
            await pool.aclose()
        return sink.response

    return asyncio.run(main())


@pytest.mark.parametrize("stream", [True, False])
def test_tgis_whole_answer_is_ok(server: HostileServer, stream: bool) -> None:
    response = send_tgis(server, "ok", stream=stream)
    assert response.ok, response.error
    assert response.finish_reason == "length"


@pytest.mark.parametrize(("cut", "chunks"), [("close", SENT), ("before_done", TOKENS)])
def test_tgis_stream_ending_without_a_stop_reason_is_an_error(
    server: HostileServer, cut: str, chunks: int
) -> None:
    response = send_tgis(server, cut, stream=True)
    assert not response.ok
    assert response.error == (
        f"stream cut short: the stream ended after {chunks} text chunks"
        f" ({chunks + 1} messages), without a stop_reason"
    )
    assert len(response.chunks) == chunks


def test_tgis_unary_answer_without_a_stop_reason_is_an_error(server: HostileServer) -> None:
    response = send_tgis(server, "close", stream=False)
    assert response.error == "answer without a stop_reason (NOT_FINISHED)"


def test_reachable_tells_a_server_that_lives_on_from_one_gone(server: HostileServer) -> None:
    """After a cut, the correctness probe asks whether the server still answers anything
    (its ``/health`` here is a 404: an answer all the same)."""

    async def main(url: str) -> bool:
        pool = ConnectionPool(url)
        try:
            return await pool.reachable(timeout_s=5)
        finally:
            await pool.aclose()

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        gone = f"http://127.0.0.1:{free.getsockname()[1]}"
    assert asyncio.run(main(server.url)) is True
    assert asyncio.run(main(gone)) is False
