"""The SSE parser: events survive any split of the byte stream."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from testbed.clients import openai
from testbed.clients.sse import MAX_EVENT, SseEvent, SseParser

STREAM = (
    b'data: {"a":1}\n\n: keep-alive comment\n\nevent: done\ndata: x\ndata: y\n\ndata: [DONE]\n\n'
)


def test_whole_stream() -> None:
    parser = SseParser()
    assert parser.feed(STREAM) == [b'{"a":1}', b"x\ny", b"[DONE]"]


def test_event_names() -> None:
    events = SseParser().feed_events(STREAM)
    assert SseEvent("done", b"x\ny") in events


def test_incomplete_event_waits_for_the_blank_line() -> None:
    parser = SseParser()
    assert parser.feed(b"data: 1\n") == []
    assert parser.feed(b"\n") == [b"1"]


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12))
def test_any_split_gives_the_same_events(cuts: list[int]) -> None:
    for stream in (STREAM, STREAM.replace(b"\n", b"\r\n")):
        points = sorted({min(c, len(stream)) for c in cuts})
        parser = SseParser()
        out: list[bytes] = []
        start = 0
        for point in [*points, len(stream)]:
            out += parser.feed(stream[start:point])
            start = point
        assert out == [b'{"a":1}', b"x\ny", b"[DONE]"]


def test_data_without_space_and_lone_cr() -> None:
    assert SseParser().feed(b"data:abc\r\rdata: d\r\n\r\n") == [b"abc", b"d"]


@pytest.mark.parametrize(
    ("read", "payloads"),
    [
        (b"data: {}\n\n", [b"{}"]),  # the one-event fast path
        (b"data: a\r\n\r\n", [b"a"]),  # CRLF line ends: not the fast path, same answer
        (b"data: a\rb\n\n", [b"a"]),  # a lone CR ends the line; "b" is no field
        (b"data: a\ndata: b\n\n", [b"a\nb"]),
        (b"data: \n\n", [b""]),
        (b"data: a\n\ndata: b\n\n", [b"a", b"b"]),
    ],
)
def test_one_read_one_event_fast_path_agrees(read: bytes, payloads: list[bytes]) -> None:
    assert SseParser().feed(read) == payloads
    # the same bytes split before the end take the general path
    parser = SseParser()
    assert parser.feed(read[:3]) + parser.feed(read[3:]) == payloads


def test_an_event_that_never_ends_is_not_kept_for_ever() -> None:
    """Past MAX_EVENT bytes without a blank line the parser gives up on the stream: its
    buffer is dropped, nothing more is parsed (not even a later whole event), and the
    stream sink makes that the response's error."""
    piece = b"x" * (1 << 20)
    parser = SseParser()
    assert parser.feed(b"data: " + piece) == []
    for _ in range(MAX_EVENT >> 20):
        assert parser.feed(piece) == []
    assert parser.too_long
    assert parser.pending
    assert parser.feed(b'\n\ndata: {"a": 1}\n\n') == []

    sink = openai.sink(stream=True)
    sink.on_head(200, {"transfer-encoding": "chunked"}, 1)
    sink.on_data(b'data: {"choices": [{"text": "a"}]}\n\n', 2)
    for _ in range((MAX_EVENT >> 20) + 1):
        sink.on_data(b"data: " + piece if _ == 0 else piece, 3)
    sink.on_end(4)
    assert sink.response.error == "stream event over 16 MiB without its end"
    assert [text for _, text in sink.response.chunks] == ["a"]
