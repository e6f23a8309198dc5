"""Answers no server sends are the response's error: JSON that is not in the protocol's shape
(a decoder's exception used to escape ``data_received``), a body without end (it used to be
buffered whole, however long)."""

from __future__ import annotations

from types import ModuleType

import pytest

from testbed.clients import openai, tgi
from testbed.clients.response import MAX_BODY, MAX_ERROR_BODY, Response


@pytest.mark.parametrize(
    ("protocol", "payload", "words"),
    [
        (openai, b'{"choices":{"0":{"text":"a"}}}', "KeyError"),
        (openai, b'{"choices":["a"]}', "AttributeError"),
        (openai, b'{"choices":[{"delta":"a"}]}', "AttributeError"),
        (tgi, b'{"token":"a"}', "AttributeError"),
    ],
)
def test_a_misshapen_event_or_body_is_the_responses_error(
    protocol: ModuleType, payload: bytes, words: str
) -> None:
    def read(stream: bool) -> Response:
        sink = protocol.sink(stream=stream)
        sink.on_head(200, {"content-type": "text/event-stream"}, 1)
        if stream:
            sink.on_data(b"data: " + payload + b"\n\n", 2)
            sink.on_data(b"data: [DONE]\n\n", 3)
        else:
            sink.on_data(payload, 2)
        sink.on_end(4)
        response: Response = sink.response
        return response

    streamed, body = read(True), read(False)
    assert not streamed.ok
    assert streamed.error.startswith(f"unreadable stream event ({words}")
    assert not body.ok
    assert body.error.startswith(f"unreadable response body ({words}")


def test_a_body_without_end_is_refused_not_buffered() -> None:
    piece = b"x" * (1 << 20)
    sink = openai.sink(stream=False)
    sink.on_head(200, {"content-length": str(2 * MAX_BODY)}, 1)
    for _ in range(2 * MAX_BODY // len(piece)):
        sink.on_data(piece, 2)
    sink.on_end(3)
    kept = sum(map(len, sink._parts))  # type: ignore[union-attr]
    assert MAX_BODY <= kept <= MAX_BODY + len(piece)
    assert sink.response.error == "response body over 64 MiB: no answer is that long"


@pytest.mark.parametrize("stream", [True, False])
def test_an_error_answer_keeps_the_start_of_its_body(stream: bool) -> None:
    sink = openai.sink(stream=stream)
    sink.on_head(500, {"transfer-encoding": "chunked"}, 1)
    for n in range(10_000):
        sink.on_data(b"oops %d " % n + b"." * 100, 2)
    sink.on_end(3)
    assert len(sink._error_body or b"") < MAX_ERROR_BODY + 200
    assert sink.response.error is not None
    assert sink.response.error.startswith("HTTP 500: oops 0 ....")
