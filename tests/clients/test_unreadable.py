"""JSON that is not in the protocol's shape is the response's error, never a crash of the
connection's read (a decoder's exception used to escape ``data_received``)."""

from __future__ import annotations

from types import ModuleType

import pytest

from testbed.clients import openai, tgi
from testbed.clients.response import Response


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
