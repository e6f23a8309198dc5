"""The compiled per-read path (``_readpath.c``) answers as the Python path does.

Every answer below, delivered as its server wrote it (a chunk per read: the compiled path's
shape), cut at every byte and byte by byte, goes through the Python classes
(:class:`Http1Connection`, :class:`StreamSink`, :func:`openai.decode_chunk`) and through what
the pool and the protocol modules use (:data:`http1.CONNECTION`, :data:`response.STREAM_SINK`,
:data:`openai.DECODE`); the two outcomes — the response's every field, each chunk's read, the
request's error, the connection's reuse — must be equal. The decoder alone is compared on
every shape of chunk a server could send.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import orjson
import pytest

from testbed.clients import http1, openai, response, tgi
from testbed.clients.response import Decoder, Ending

HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/event-stream\r\n\r\n"
LAST = b"0\r\n\r\n"


def chunk(body: bytes, size: str | None = None) -> bytes:
    return (size or f"{len(body):x}").encode() + b"\r\n" + body + b"\r\n"


def event(obj: Any, sep: bytes = b"\n") -> bytes:
    return b"data: " + orjson.dumps(obj) + sep + sep


def text(s: str, **choice: Any) -> bytes:
    return event({"choices": [{"index": 0, "text": s} | choice]})


DONE = chunk(b"data: [DONE]\n\n")
USAGE = chunk(event({"choices": [], "usage": {"completion_tokens": 3, "prompt_tokens": 2}}))
STREAM = [HEAD, chunk(text("a")), chunk(text(" b")), chunk(text("c", finish_reason="length"))]
STREAM += [USAGE, DONE, LAST]
CHAT = [chunk(event({"choices": [{"delta": {"role": "assistant"}}]}))]
CHAT += [chunk(event({"choices": [{"delta": {"content": "hi"}}]}))]
CHAT += [chunk(event({"choices": [{"delta": {}, "finish_reason": "stop"}]}))]

#: The reads as the server wrote them, the decoder, the ending, keep_raw.
Answer = tuple[list[bytes], Decoder, Ending, bool]


def openai_answer(reads: list[bytes], *, keep_raw: bool = False) -> Answer:
    return reads, openai.decode_chunk, openai.ENDING, keep_raw


ANSWERS: dict[str, Answer] = {
    "completions": openai_answer(STREAM),
    "completions kept raw": openai_answer(STREAM, keep_raw=True),
    "chat": openai_answer([HEAD, *CHAT, DONE, LAST]),
    "CRLF line ends": openai_answer(
        [
            HEAD,
            chunk(event({"choices": [{"text": "x", "finish_reason": "stop"}]}, b"\r\n")),
            chunk(b"data: [DONE]\r\n\r\n"),
            LAST,
        ]
    ),
    "two events in a chunk, one across two": openai_answer(
        [
            HEAD,
            chunk(text("a") + text("b")),
            chunk(text("c")[:9]),
            chunk(text("c")[9:]),
            chunk(text("", finish_reason="stop")),
            DONE,
            LAST,
        ]
    ),
    "an event's two data lines in two chunks": openai_answer(
        [
            HEAD,
            chunk(text("a")[:-1]),
            chunk(text("b")),
            chunk(text("c", finish_reason="stop")),
            DONE,
            LAST,
        ]
    ),
    "comments, named and multi-line events, no space": openai_answer(
        [
            HEAD,
            chunk(b": ping\n\n"),
            chunk(b"event: x\ndata: {}\n\n"),
            chunk(b'data: {"choices":[{"text":\ndata: "y"}]}\n\n'),
            chunk(b'data:{"choices":[{"text":"z","finish_reason":"stop"}]}\n\n'),
            DONE,
            LAST,
        ]
    ),
    "undecodable, empty and odd JSON": openai_answer(
        [
            HEAD,
            chunk(b"data: {oops\n\n"),
            chunk(b"data: \n\n"),
            chunk(b"data: [1,2]\n\n"),
            chunk(b"data: 7\n\n"),
            chunk(b'data: {"choices":{"0":1}}\n\n'),
            DONE,
            LAST,
        ]
    ),
    "an error event": openai_answer(
        [HEAD, chunk(text("a")), chunk(event({"error": {"message": "boom"}})), DONE, LAST]
    ),
    "sizes in upper case, padded, with an extension": openai_answer(
        [
            HEAD,
            chunk(text("a"), "0" * 6 + f"{len(text('a')):X}"),
            chunk(text("b"), "AB;x=1"),
            DONE,
            LAST,
        ]
    ),
    "a wrong chunk size": openai_answer(
        [
            HEAD,
            chunk(text("a")),
            f"{len(text('b')) - 3:x}\r\n".encode() + text("b") + b"\r\n",
            DONE,
            LAST,
        ]
    ),
    "chunk data not followed by CRLF": openai_answer(
        [
            HEAD,
            chunk(text("a")),
            f"{len(text('b')):x}\r\n".encode() + text("b") + b"XY",
            DONE,
            LAST,
        ]
    ),
    "cut short (no [DONE], the connection closes)": openai_answer(
        [HEAD, chunk(text("a")), chunk(text("b"))]
    ),
    "content after the finish reason": openai_answer(
        [HEAD, chunk(text("a", finish_reason="stop")), chunk(text("b")), DONE, LAST]
    ),
    "events after [DONE]": openai_answer(
        [HEAD, chunk(text("a", finish_reason="stop")), DONE, chunk(text("late")), DONE, LAST]
    ),
    "an error object at the top level": openai_answer(
        [
            HEAD,
            chunk(text("a")),
            chunk(event({"object": "error", "message": "boom", "type": "X", "code": 500})),
            DONE,
            LAST,
        ]
    ),
    "a second choice": openai_answer(
        [
            HEAD,
            chunk(text("a")),
            chunk(text("x", index=1)),
            chunk(text("b", finish_reason="stop")),
            DONE,
            LAST,
        ]
    ),
    "an error status": openai_answer(
        [
            b"HTTP/1.1 503 Busy\r\nTransfer-Encoding: chunked\r\n\r\n",
            chunk(event({"error": "busy"})),
            LAST,
        ]
    ),
    "tgi": (
        [
            HEAD,
            chunk(event({"token": {"id": 1, "text": "a", "special": False}})),
            chunk(event({"token": {"id": 2, "text": "</s>", "special": True}})),
            chunk(event({"token": {"text": "b"}, "generated_text": "ab", "details": None})),
            LAST,
        ],
        tgi.decode_event,
        tgi.ENDING,
        True,
    ),
}


class Transport:
    def __init__(self) -> None:
        self.closed = False

    def write(self, data: bytes) -> None:
        del data

    def abort(self) -> None:
        self.closed = True

    close = abort

    def is_closing(self) -> bool:
        return self.closed


async def outcome(
    connection: type[http1.Http1Connection],
    sink_class: type[response.StreamSink],
    answer: str,
    reads: list[bytes],
) -> dict[str, Any]:
    """Deliver ``reads`` to a fresh connection and sink; what came of it, each chunk's time
    replaced by the index of the read that brought it."""
    _, decode, ending, keep_raw = ANSWERS[answer]
    if sink_class is response.STREAM_SINK and decode is openai.decode_chunk:
        decode = openai.DECODE  # what openai.sink uses
    conn = connection()
    conn.connection_made(Transport())  # type: ignore[arg-type]
    sink = sink_class(decode, keep_raw=keep_raw, ending=ending)
    done = asyncio.get_running_loop().create_future()
    conn.start(b"", sink, done)
    windows = []
    for data in reads:
        before = time.perf_counter_ns()
        conn.data_received(data)
        windows.append((before, time.perf_counter_ns()))
    if not done.done():
        conn.connection_lost(None)
    failed = repr(done.exception()) if done.exception() else None

    def read_of(t_ns: int) -> int:
        (index,) = [i for i, (a, b) in enumerate(windows) if a <= t_ns <= b]
        return index

    fields = {
        name: getattr(sink.response, name)
        for name in response.Response.__slots__  # type: ignore[attr-defined]
        if not name.startswith("t_")
    }
    fields["chunks"] = [(read_of(t), s) for t, s in sink.response.chunks]
    done_ns = sink.response.t_done_ns
    fields["done read"] = read_of(done_ns) if done_ns and done_ns <= windows[-1][1] else None
    return fields | {"failed": failed, "reusable": conn.reusable}


def both(answer: str, reads: list[bytes]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Python path's outcome and the compiled one's."""

    async def main() -> tuple[dict[str, Any], dict[str, Any]]:
        python = await outcome(http1.Http1Connection, response.StreamSink, answer, reads)
        return python, await outcome(http1.CONNECTION, response.STREAM_SINK, answer, reads)

    return asyncio.run(main())


def splits(reads: list[bytes]) -> list[tuple[str, list[bytes]]]:
    """As written; every cut into two reads; byte by byte."""
    wire = b"".join(reads)
    cuts = [(f"cut at {i}", [wire[:i], wire[i:]]) for i in range(1, len(wire))]
    return [("as written", reads), *cuts, ("byte by byte", [bytes([b]) for b in wire])]


#: OpenAI chunks: the plain shapes the compiled decoder reads, and what it leaves to decode_chunk.
CHUNKS: list[Any] = [
    {"choices": [{"index": 0, "text": "a", "finish_reason": None}]},
    {"choices": [{"text": "", "finish_reason": "length"}], "usage": None},
    {"choices": [{"text": None, "delta": {"content": "b"}}]},
    {"choices": [{"delta": {"role": "assistant"}}]},
    {"choices": [{"delta": {}, "message": {"content": "m"}}]},
    {"choices": [{"message": {"content": "c"}, "finish_reason": "stop"}]},
    {"choices": [{"text": 5}, {"text": "second"}]},
    {"choices": [], "usage": {"completion_tokens": 3}},
    {"choices": None, "usage": {}},
    {"choices": [{"text": "a"}], "error": ""},
    {"choices": [{"text": "a"}], "error": {"message": "boom"}},
    {"error": "plain"},
    {"choices": {"0": {"text": "a"}}},
    {"choices": ["a"]},
    {"choices": [{"delta": "a"}]},
    {"choices": [{"delta": {"content": ["x"]}, "finish_reason": 0}]},
    {"choices": "abc"},
    {"object": "error", "message": "boom", "type": "X", "code": 500},
    {"message": ""},
    {"error": {"message": "", "type": "X"}},
    {"choices": [{"index": 1, "text": "x"}]},
    {"choices": [{"index": 2**70, "text": "x"}]},
    {"choices": [{"index": "0", "text": "x"}]},
    {"choices": [{"index": True, "text": "x"}]},
    {"choices": [{"index": -1, "text": "x"}]},
    {"choices": [{"index": None, "text": "x"}]},
    {"choices": [{"index": 0, "text": "x", "finish_reason": True}]},
    {"choices": [{"text": ""}], "usage": [1]},
    {"choices": [], "usage": "x"},
    {"usage": {"completion_tokens": 1}},
    {},
    [],
    [{"choices": [{"text": "a"}]}],
    "text",
    7,
    None,
]


@pytest.mark.parametrize("finished", [None, "stop"])
@pytest.mark.parametrize(
    "obj",
    CHUNKS,
    ids=[json.dumps(c)[:40] for c in CHUNKS],
)
def test_the_compiled_decoder_reads_as_decode_chunk(obj: Any, finished: str | None) -> None:
    """Each chunk, first or after the one with the finish reason (content then is an error)."""

    def read(decode: Decoder) -> tuple[Any, ...]:
        got = response.Response(finish_reason=finished)
        try:
            decode(got, obj, 7)
        except Exception as exc:
            return (type(exc), str(exc))
        return (got.chunks, got.finish_reason, got.usage, got.error, got.top_index)

    assert read(openai.DECODE) == read(openai.decode_chunk)


def test_the_compiled_path_is_built_and_narrow() -> None:
    """The test command builds it (``pip install -e`` with a C compiler): a missing compiler
    is a failed install step here, not a slower client nobody notices. Its interface is three
    pure functions the Python classes call — no C base class that would read their state."""
    from testbed.clients import _readpath

    public = {name for name in vars(_readpath) if not name.startswith("_")}
    assert public == {"whole_chunk", "whole_event", "plain_choice"}
    assert http1.CONNECTION.__mro__[1:] == http1.Http1Connection.__mro__
    assert response.STREAM_SINK.__mro__[1:] == response.StreamSink.__mro__
    assert openai.DECODE is not openai.decode_chunk


def test_whole_chunk_takes_one_whole_chunk_only() -> None:
    from testbed.clients._readpath import whole_chunk

    assert whole_chunk(b"5\r\nhello\r\n") == b"hello"
    assert whole_chunk(b"0000000A\r\n0123456789\r\n") == b"0123456789"  # 8 digits, upper case
    for other in [
        b"000000005\r\nhello\r\n",  # a size of more than 8 digits: the parser's to read
        b"5;x=1\r\nhello\r\n",  # an extension
        b"0\r\n\r\n",  # the last chunk
        b"5\r\nhello\r\n3\r\nabc\r\n",  # two chunks
        b"5\r\nhell",  # part of one
        b"5\r\nhelloXY",  # data not followed by CRLF
        b"5\nhello\r\n",  # a bare LF after the size
        b"\r\nhello\r\n",  # no size
        b"",
    ]:
        assert whole_chunk(other) is None, other
    with pytest.raises(TypeError, match="data must be bytes"):
        whole_chunk("5\r\nhello\r\n")  # type: ignore[arg-type]


def test_whole_event_takes_one_whole_data_event_only() -> None:
    from testbed.clients._readpath import whole_event

    assert whole_event(b'data: {"a":[1]}\n\n') == {"a": [1]}
    assert whole_event(b"data: 7\n\n") == 7
    for other in [
        b"data: [DONE]\n\n",  # not JSON: the sink's to read
        b"data: {oops\n\n",
        b"data: \n\n",
        b"data: null\n\n",  # JSON null reads as None, "not taken": the sink says what it is
        b'data: {"a":1}\r\n\r\n',  # CRLF line ends
        b'data: {"a":1}\n\ndata: {"b":2}\n\n',  # two events
        b'data: {"a":1}\n',  # part of one
        b'data:{"a":1}\n\n',  # no space
        b'event: x\ndata: {"a":1}\n\n',
        b": ping\n\n",
    ]:
        assert whole_event(other) is None, other
    with pytest.raises(TypeError, match="data must be bytes"):
        whole_event(bytearray(b"data: 7\n\n"))  # type: ignore[arg-type]


def test_plain_choice_gives_values_and_writes_nothing() -> None:
    from testbed.clients._readpath import plain_choice

    usage = {"completion_tokens": 3}
    obj = {"choices": [{"index": 0, "text": "a", "finish_reason": "stop"}], "usage": usage}
    before = json.dumps(obj)
    assert plain_choice(obj) == ("a", "stop", usage)
    assert json.dumps(obj) == before
    assert plain_choice({"choices": [{"delta": {"content": "b"}}]}) == ("b", None, None)
    assert plain_choice({"choices": [], "usage": None}) == (None, None, None)
    assert plain_choice({"choices": [{"index": 1, "text": "x"}]}) is None  # decode_chunk's
    assert plain_choice({"error": {"message": "boom"}}) is None


@pytest.mark.parametrize("answer", list(ANSWERS))
def test_the_compiled_path_answers_as_the_python_path(answer: str) -> None:
    async def main() -> None:
        for how, reads in splits(ANSWERS[answer][0]):
            python = await outcome(http1.Http1Connection, response.StreamSink, answer, reads)
            compiled = await outcome(http1.CONNECTION, response.STREAM_SINK, answer, reads)
            assert compiled == python, how

    asyncio.run(main())


def test_the_answers_mean_what_their_names_say() -> None:
    """The corpus above reaches the cases it names (else equality would prove little)."""

    def whole(answer: str) -> dict[str, Any]:
        return both(answer, ANSWERS[answer][0])[1]

    ok = whole("completions")
    assert (ok["text"], ok["finish_reason"], ok["ended"], ok["error"]) == (
        "a bc",
        "length",
        True,
        None,
    )
    assert [read for read, _ in ok["chunks"]] == [1, 2, 3]
    assert ok["usage"]["completion_tokens"] == 3
    assert ok["reusable"]
    assert not ok["raw"]
    assert len(whole("completions kept raw")["raw"]) == 4
    assert whole("chat")["text"] == "hi"
    assert whole("CRLF line ends")["text"] == "x"
    assert whole("two events in a chunk, one across two")["text"] == "abc"
    assert whole("comments, named and multi-line events, no space")["text"] == "yz"
    odd = whole("undecodable, empty and odd JSON")  # the last error stays
    assert odd["error"].startswith("unreadable stream event (KeyError")
    assert odd["events"] == 5
    assert whole("an error event")["error"] == "boom"
    after = whole("content after the finish reason")
    assert (after["text"], after["error"]) == (
        "ab",
        "content after the chunk with finish_reason 'stop': 'b'",
    )
    late = whole("events after [DONE]")  # the last of the two says what came
    assert (late["text"], late["error"]) == (
        "a",
        "a second data: [DONE] after data: [DONE], the end of the stream",
    )
    assert whole("an error object at the top level")["error"] == "boom (type X, code 500)"
    second = whole("a second choice")
    assert (second["text"], second["top_index"]) == ("ab", 1)
    assert second["error"] == "a choice with index 1 in the answer to a request for 1 choice"
    assert whole("sizes in upper case, padded, with an extension")["text"] == "ab"
    assert "malformed HTTP response" in whole("a wrong chunk size")["failed"]
    assert "not followed by CRLF" in whole("chunk data not followed by CRLF")["failed"]
    assert whole("cut short (no [DONE], the connection closes)")["error"].startswith("stream cut")
    assert whole("an error status")["error"] == 'HTTP 503: data: {"error":"busy"}'
    lines = whole("an event's two data lines in two chunks")  # one event: '{…}\n{…}'
    assert lines["text"] == "c"
    assert lines["error"].startswith("undecodable stream event")
    assert whole("tgi")["text"] == "ab"
    assert whole("tgi")["ended"]


def test_bytes_after_a_finished_response_are_ignored_by_both() -> None:
    python, compiled = both("completions", [*STREAM, chunk(text("late"))])
    assert compiled == python
    assert compiled["text"] == "a bc"
