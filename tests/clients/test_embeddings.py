"""clients/embeddings: an embeddings answer is checked, not trusted — one vector per input, of
one length (the one asked), numbers or whole float32s in base64, usage counts that can be
true; an error object is the server's refusal in its words."""

from __future__ import annotations

import base64
import json
import struct
from typing import Any

import pytest

from testbed.clients.embeddings import EmbeddingsSink, Expect, expect_of, request_body

HEAD = {"content-type": "application/json", "content-length": "0"}


def _answer(body: Any, expect: Expect, *, status: int = 200) -> EmbeddingsSink:
    sink = EmbeddingsSink(expect, keep_vectors=True)
    sink.on_sent(1)
    sink.on_head(status, HEAD, 2)
    sink.on_data(json.dumps(body).encode(), 3)
    sink.on_end(4)
    return sink


def _data(*vectors: Any) -> list[dict[str, Any]]:
    return [{"index": i, "object": "embedding", "embedding": v} for i, v in enumerate(vectors)]


def _body(data: Any, usage: Any = None) -> dict[str, Any]:
    return {
        "object": "list",
        "data": data,
        "model": "m",
        "usage": usage or {"prompt_tokens": 6, "total_tokens": 6, "completion_tokens": 0},
    }


def test_a_right_answer_gives_its_vectors_in_input_order() -> None:
    data = _data([0.5, 0.5], [1, 0])[::-1]  # the server may list them in any order
    sink = _answer(_body(data), Expect(2, 2))
    assert sink.response.ok, sink.response.error
    assert sink.embeddings.vectors == [[0.5, 0.5], [1, 0]]
    assert sink.embeddings.dimensions == 2
    assert sink.response.usage == {"prompt_tokens": 6, "total_tokens": 6, "completion_tokens": 0}


def test_base64_vectors_are_little_endian_float32s() -> None:
    packed = base64.b64encode(struct.pack("<3f", 0.25, -1.0, 2.0)).decode()
    sink = _answer(_body(_data(packed)), Expect(1))
    assert sink.response.ok, sink.response.error
    assert sink.embeddings.vectors == [[0.25, -1.0, 2.0]]


@pytest.mark.parametrize(
    ("data", "expect", "words"),
    [
        (_data([1.0, 0.0]), Expect(2), "1 embeddings in the answer to a request with 2 inputs"),
        (_data([1.0], [1.0], [1.0]), Expect(2), "3 embeddings"),
        (_data([1.0, 0.0], [1.0]), Expect(2), "different lengths in one answer: [1, 2]"),
        (_data([1.0, 0.0]), Expect(1, 3), "2 dimensions, but the request asked for 3"),
        (
            [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [2.0]}],
            Expect(2),
            "data[1].index 0 is not one of 0..1 used once",
        ),
        ([{"index": 2, "embedding": [1.0]}], Expect(1), "data[0].index 2"),
        ([{"index": "0", "embedding": [1.0]}], Expect(1), 'data[0].index "0"'),
        (_data([1.0, "2"]), Expect(1), 'data[0].embedding holds "2", not a number'),
        (_data([1.0, True]), Expect(1), "data[0].embedding holds true, not a number"),
        (_data([]), Expect(1), "data[0].embedding is not a list of numbers"),
        (_data("AAAA#"), Expect(1), "neither a list of numbers nor base64"),
        (_data(base64.b64encode(b"abcdef").decode()), Expect(1), "6 bytes of base64"),
        ({"0": [1.0]}, Expect(1), "data is not a list of embeddings"),
    ],
)
def test_vectors_that_are_not_the_ones_asked_for_are_the_servers_error(
    data: Any, expect: Expect, words: str
) -> None:
    sink = _answer(_body(data), expect)
    assert sink.response.error is not None
    assert words in sink.response.error


@pytest.mark.parametrize(
    ("usage", "words"),
    [
        ({"prompt_tokens": 6, "total_tokens": 7}, "usage.total_tokens 7 is not prompt_tokens 6"),
        ({"prompt_tokens": 6.0, "total_tokens": 6}, "usage.prompt_tokens 6.0 is not a count"),
        ({"prompt_tokens": -1, "total_tokens": -1}, "usage.prompt_tokens -1 is not a count"),
        ("six", "usage is not an object of counts"),
    ],
)
def test_usage_that_cannot_be_true_is_the_servers_error(usage: Any, words: str) -> None:
    sink = _answer(_body(_data([1.0]), usage), Expect(1))
    assert sink.response.error is not None
    assert words in sink.response.error


def test_an_error_object_is_the_refusal_in_the_servers_words() -> None:
    refusal = {"error": {"message": "dimensions too large", "type": "BadRequestError", "code": 400}}
    sink = _answer(refusal, Expect(1), status=400)
    assert sink.response.error == (
        "HTTP 400: the server refused the request: dimensions too large"
        " (type BadRequestError, code 400)"
    )


def test_a_body_cut_short_is_never_read_as_vectors() -> None:
    sink = EmbeddingsSink(Expect(1))
    sink.on_head(200, HEAD, 1)
    sink.on_data(b'{"data": [{"index": 0, "embedding": [1.0]}]}', 2)
    sink.on_cut("connection reset", 3)
    assert sink.response.error is not None
    assert "cut short" in sink.response.error


@pytest.mark.parametrize(
    ("given", "count"),
    [("one text", 1), (["a", "b", "c"], 3), ([1, 2, 3], 1), ([[1, 2], [3]], 2)],
)
def test_the_expected_count_follows_vllms_four_input_forms(given: Any, count: int) -> None:
    assert expect_of({"input": given, "dimensions": 8}) == Expect(count, 8)


def test_a_request_body_sends_only_what_differs_from_the_defaults() -> None:
    assert request_body(["a"], "m") == {"model": "m", "input": ["a"]}
    body = request_body(["a", "b"], "m", dimensions=64, encoding_format="base64")
    assert body == {
        "model": "m",
        "input": ["a", "b"],
        "dimensions": 64,
        "encoding_format": "base64",
    }
