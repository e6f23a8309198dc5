"""clients/responses: the Responses API's typed stream — text deltas are the content, the end
event gives the finish reason and usage (checked in the API's own names), a failure event is
the server's error, and a stream without its end event, or with events after it, is cut
short or wrong."""

from __future__ import annotations

import json
from typing import Any

import pytest

from testbed.clients.counts import Limits
from testbed.clients.responses import limits_of, request_body, sink

HEAD = {"content-type": "text/event-stream", "transfer-encoding": "chunked"}


def _event(obj: dict[str, Any]) -> bytes:
    return f"event: {obj.get('type', 'error')}\ndata: {json.dumps(obj)}\n\n".encode()


def _done(status: str = "completed", usage: Any = None, reason: str | None = None) -> Any:
    response = {
        "object": "response",
        "status": status,
        "incomplete_details": {"reason": reason} if reason else None,
        "usage": usage or {"input_tokens": 4, "output_tokens": 2, "total_tokens": 6},
    }
    return {"type": "response.completed", "response": response}


def _delta(text: str) -> dict[str, Any]:
    return {"type": "response.output_text.delta", "output_index": 0, "delta": text}


START = [
    {"type": "response.created", "response": {"status": "in_progress", "usage": None}},
    {"type": "response.in_progress", "response": {"status": "in_progress"}},
    {"type": "response.output_item.added", "item": {"type": "message"}},
]


def _stream(events: list[Any]) -> Any:
    target = sink(stream=True, limits=Limits(8))
    target.on_sent(0)
    target.on_head(200, HEAD, 1)
    for t, event in enumerate(events, start=2):
        target.on_data(event if isinstance(event, bytes) else _event(event), t * 10)
    target.on_end(1000)
    return target.response


def test_text_deltas_are_the_content_and_the_end_event_its_finish_and_usage() -> None:
    response = _stream([*START, _delta(" a"), _delta(" b"), _done()])
    assert response.ok, response.error
    assert response.text == " a b"
    assert [t for t, _ in response.chunks] == [50, 60]  # TTFT: the first delta, not created
    assert response.finish_reason == "stop"
    assert response.usage == {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6}


@pytest.mark.parametrize(
    "end",
    [
        _done("incomplete", reason="max_output_tokens"),  # vLLM's way
        {**_done("incomplete", reason="max_output_tokens"), "type": "response.incomplete"},
    ],
)
def test_an_answer_stopped_by_max_output_tokens_finished_by_length(end: Any) -> None:
    response = _stream([*START, _delta(" a"), _delta(" b"), end])
    assert response.ok, response.error
    assert response.finish_reason == "length"


@pytest.mark.parametrize(
    ("event", "words"),
    [
        (
            {"type": "response.failed", "response": {"error": {"code": "server_error",
                                                               "message": "engine died"}}},
            "engine died (code server_error)",
        ),
        ({"type": "error", "code": "overloaded", "message": "busy"}, "busy (type error"),
        ({"error": {"message": "Internal server error", "code": 500}}, "Internal server error"),
    ],
)  # fmt: skip
def test_a_failure_event_is_the_servers_error_in_its_words(event: Any, words: str) -> None:
    response = _stream([*START, _delta(" a"), event])
    assert response.error is not None
    assert words in response.error


def test_a_stream_without_its_end_event_is_cut_short() -> None:
    response = _stream([*START, _delta(" a"), _delta(" b")])
    assert response.error == (
        "stream cut short: the stream ended after 2 text chunks, without a response.completed event"
    )


def test_an_event_after_the_end_is_the_servers_error() -> None:
    response = _stream([*START, _delta(" a"), _done(), _delta(" late")])
    assert response.error is not None
    assert "after a response.completed event, the end of the stream" in response.error
    assert response.text == " a"


@pytest.mark.parametrize(
    ("usage", "words"),
    [
        (
            {"input_tokens": 4, "output_tokens": 9, "total_tokens": 13},
            "usage.output_tokens 9 is over the request's max_output_tokens 8",
        ),
        (
            {"input_tokens": 4, "output_tokens": 2, "total_tokens": 7},
            "usage.total_tokens 7 is not input_tokens + output_tokens (4 + 2)",
        ),
        (
            {"input_tokens": 4, "output_tokens": 1, "total_tokens": 5},
            "usage.output_tokens 1 is fewer than the 2 output_text.deltas that arrived",
        ),
        (
            {"input_tokens": "4", "output_tokens": 2, "total_tokens": 6},
            'usage.input_tokens "4" is not a count of tokens',
        ),
    ],
)
def test_usage_that_cannot_be_true_is_said_in_the_apis_names(usage: Any, words: str) -> None:
    response = _stream([*START, _delta(" a"), _delta(" b"), _done(usage=usage)])
    assert response.error is not None
    assert words in response.error, response.error


def test_a_delta_that_is_not_text_and_an_untyped_event_are_errors() -> None:
    response = _stream([*START, _delta(7), _done()])  # type: ignore[arg-type]
    assert response.error == "output_text.delta 7 is not a string"
    response = _stream([*START, b'data: {"delta": " a"}\n\n', _done()])
    assert response.error is not None
    assert "without a type" in response.error


def test_a_whole_answer_is_read_from_its_output_text_parts() -> None:
    body = {
        **_done()["response"],
        "output": [
            {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "hmm"}]},
            {"type": "message", "content": [{"type": "output_text", "text": " a b"}]},
        ],
    }
    target = sink(stream=False, limits=Limits(8))
    target.on_head(200, {"content-type": "application/json", "content-length": "1"}, 1)
    target.on_data(json.dumps(body).encode(), 2)
    target.on_end(3)
    assert target.response.ok, target.response.error
    assert target.response.text == " a b"
    assert target.response.finish_reason == "stop"


def test_a_request_asks_for_its_length_and_is_not_stored() -> None:
    body = request_body("hi", "m", 16)
    assert body == {"model": "m", "input": "hi", "max_output_tokens": 16, "store": False}
    assert limits_of(body) == Limits(16)
