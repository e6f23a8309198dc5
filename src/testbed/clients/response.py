"""What a protocol client returns, and the sinks that fill it while bytes arrive.

A :class:`Response` keeps the raw observations of one request: the monotonic times it was
sent, its head arrived, each non-empty content chunk arrived and it ended, the server's
``usage`` and finish reason, and (when asked) the parsed JSON chunks. Protocol modules
(:mod:`~testbed.clients.openai`, :mod:`~testbed.clients.tgi`) supply only a *decoder*:
a function that reads one parsed JSON object into the response.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from testbed.clients.sse import SseParser

#: Reads one parsed JSON object (a stream event or a whole body) into a response at ``t_ns``.
Decoder = Callable[["Response", Any, int], None]


@dataclass(slots=True)
class Response:
    """One request's outcome. Times are ``monotonic_ns`` values (only differences mean
    anything). ``chunks`` holds ``(t_ns, text)`` for each non-empty content chunk."""

    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    text: str = ""
    chunks: list[tuple[int, str]] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    finish_reason: str | None = None
    raw: list[Any] = field(default_factory=list)
    error: str | None = None
    t_sent_ns: int = 0
    t_first_byte_ns: int = 0
    t_done_ns: int = 0
    connect_ns: int = 0  # time spent opening a new connection before sending (0: reused)
    events: int = 0  # stream events received (content or not)

    @property
    def ok(self) -> bool:
        return self.error is None and 200 <= self.status < 300

    @property
    def ttft_ns(self) -> int | None:
        """First content chunk − sent, or None when no content came."""
        return self.chunks[0][0] - self.t_sent_ns if self.chunks else None


class _Sink:
    """Common head/error handling: a non-2xx body is buffered and becomes ``error``."""

    __slots__ = ("_decode", "_error_body", "keep_raw", "response")

    def __init__(self, decode: Decoder, *, keep_raw: bool = False) -> None:
        self.response = Response()
        self._decode = decode
        self.keep_raw = keep_raw
        self._error_body: list[bytes] | None = None

    def on_connect(self, connect_ns: int) -> None:
        self.response.connect_ns = connect_ns

    def on_sent(self, t_ns: int) -> None:
        self.response.t_sent_ns = t_ns

    def on_head(self, status: int, headers: dict[str, str], t_ns: int) -> None:
        self.response.status = status
        self.response.headers = headers
        self.response.t_first_byte_ns = t_ns
        if not 200 <= status < 300:
            self._error_body = []

    def _end_error(self) -> bool:
        if self._error_body is None:
            return False
        body = b"".join(self._error_body).decode("utf-8", "replace").strip()
        self.response.error = f"HTTP {self.response.status}: {body[:300]}"
        return True


class StreamSink(_Sink):
    """Parses an SSE body event by event; each event's JSON goes to the decoder with the
    time its bytes were read."""

    __slots__ = ("_sse",)

    def __init__(self, decode: Decoder, *, keep_raw: bool = False) -> None:
        super().__init__(decode, keep_raw=keep_raw)
        self._sse = SseParser()

    def on_data(self, data: bytes, t_ns: int) -> None:
        if self._error_body is not None:
            self._error_body.append(data)
            return
        response, decode = self.response, self._decode
        for payload in self._sse.feed(data):
            if payload == b"[DONE]":
                continue
            response.events += 1
            try:
                obj = orjson.loads(payload)
            except ValueError:
                response.error = f"undecodable stream event: {payload[:200]!r}"
                continue
            if self.keep_raw:
                response.raw.append(obj)
            decode(response, obj, t_ns)

    def on_end(self, t_ns: int) -> None:
        response = self.response
        response.t_done_ns = t_ns
        if not self._end_error():
            response.text = "".join(text for _, text in response.chunks)


class BodySinkJson(_Sink):
    """Buffers a whole (non-streamed) JSON body and decodes it once at the end; the body's
    arrival time is the one content timestamp."""

    __slots__ = ("_parts",)

    def __init__(self, decode: Decoder, *, keep_raw: bool = True) -> None:
        super().__init__(decode, keep_raw=keep_raw)
        self._parts: list[bytes] = []

    def on_data(self, data: bytes, t_ns: int) -> None:
        self._parts.append(data)

    def on_end(self, t_ns: int) -> None:
        response = self.response
        response.t_done_ns = t_ns
        if self._error_body is not None:
            self._error_body = self._parts
            self._end_error()
            return
        try:
            obj = orjson.loads(b"".join(self._parts))
        except ValueError as exc:
            response.error = f"undecodable response body: {exc}"
            return
        if self.keep_raw:
            response.raw.append(obj)
        self._decode(response, obj, t_ns)
        response.text = "".join(text for _, text in response.chunks)


#: Either sink; both satisfy :class:`~testbed.clients.http.BodySink`.
Sink = StreamSink | BodySinkJson
