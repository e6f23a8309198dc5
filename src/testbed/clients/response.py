"""What a protocol client returns, and the sinks that fill it while bytes arrive.

A :class:`Response` keeps the raw observations of one request: the monotonic times it was
sent, its head arrived, each non-empty content chunk arrived and it ended, the server's
``usage`` and finish reason, and (when asked) the parsed JSON chunks. Protocol modules
(:mod:`~testbed.clients.openai`, :mod:`~testbed.clients.tgi`) supply only a *decoder*:
a function that reads one parsed JSON object into the response — and an :class:`Ending`:
what a complete answer of theirs ends with.

An answer that does not end that way was cut short, and that is the server's error of the
request, never a success: a stream without its terminator (OpenAI's ``data: [DONE]``, TGI's
final event), an answer without a finish reason, a connection closed before the body's
framing ended (:meth:`on_cut`). HTTP allows a body delimited by the connection's close, so
only the protocol's own terminator tells a finished stream from a dead server. Nothing may
follow that terminator either: an event after it (a second ``[DONE]``) is the server's error.

A complete answer's claims are checked last (:func:`~testbed.clients.counts.check`): token
counts that cannot be true, given the request's :class:`~testbed.clients.counts.Limits` and
the content that arrived, and a choice the request did not ask for, are the server's error.

Protocol modules make their streamed sinks with :data:`STREAM_SINK`: :class:`StreamSink` with
its hot path — one whole ``data:`` event, the common read of a token-by-token stream — split
and parsed by the compiled per-read path (``_readpath.c``: bytes in, the event's JSON out) when
it was built; everything else comes to :meth:`StreamSink.on_data`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from testbed.clients import counts
from testbed.clients.counts import NO_LIMITS, Limits, plural
from testbed.clients.readpath import compiled
from testbed.clients.sse import MAX_EVENT, SseParser

#: The largest whole (non-streamed) body read: an answer with every token's top logprobs is a
#: few MiB; past this the server is sending what no answer is, and the response says so.
MAX_BODY = 64 * 1024 * 1024
#: The part of an error answer's body kept (its error shows the first 300 characters).
MAX_ERROR_BODY = 64 * 1024

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
    ended: bool = False  # the protocol's end-of-answer marker arrived (see Ending)
    top_index: int = 0  # the highest choice index an OpenAI chunk carried (0: one choice)

    @property
    def ok(self) -> bool:
        return self.error is None and 200 <= self.status < 300

    @property
    def ttft_ns(self) -> int | None:
        """First content chunk − sent, or None when no content came."""
        return self.chunks[0][0] - self.t_sent_ns if self.chunks else None


@dataclass(frozen=True, slots=True)
class Ending:
    """How a complete answer of one protocol ends. ``marker`` names, for the error message,
    what a stream's last event carries (the decoder or the sink sets ``Response.ended`` when
    it arrives); ``finish_reason``: a complete answer also says why it stopped (TGI's says
    so only when ``details`` were asked, which its decoder checks itself)."""

    marker: str
    finish_reason: bool = True


def cut_short(
    response: Response, ending: Ending, *, stream: bool, how: str, cut: bool
) -> str | None:
    """Why the 2xx ``response`` is not a complete answer (None when it is). ``how`` says how
    its body ended, ``cut`` whether the connection closed before the body's framing did."""
    chunks = plural(len(response.chunks), "text chunk")
    if stream and (cut or not response.ended):
        return f"stream cut short: {how} after {chunks}, without {ending.marker}"
    if cut:
        return f"response body cut short: {how}"
    if ending.finish_reason and response.finish_reason is None:
        if stream:
            return f"stream without a finish reason: {ending.marker} came after {chunks}"
        return "answer without a finish reason"
    return None


class _Sink:
    """Common head/error handling: a non-2xx body is buffered and becomes ``error``."""

    __slots__ = (
        "_cut",
        "_decode",
        "_ending",
        "_error_body",
        "_limits",
        "_until_close",
        "keep_raw",
        "response",
    )

    def __init__(
        self,
        decode: Decoder,
        *,
        keep_raw: bool = False,
        ending: Ending | None = None,
        limits: Limits = NO_LIMITS,
    ) -> None:
        self.response = Response()
        self._decode = decode
        self._ending = ending
        self._limits = limits
        self.keep_raw = keep_raw
        self._error_body: bytearray | None = None  # an error answer's body, its start
        self._cut: str | None = None  # how the connection closed mid-body, if it did
        self._until_close = False  # the body ends when the connection closes (no framing)

    def on_connect(self, connect_ns: int) -> None:
        self.response.connect_ns = connect_ns

    def on_sent(self, t_ns: int) -> None:
        self.response.t_sent_ns = t_ns

    def on_head(self, status: int, headers: dict[str, str], t_ns: int) -> None:
        self.response.status = status
        self.response.headers = headers
        self.response.t_first_byte_ns = t_ns
        framed = (
            "content-length" in headers or "chunked" in headers.get("transfer-encoding", "").lower()
        )
        self._until_close = not framed
        if not 200 <= status < 300:
            self._error_body = bytearray()

    def on_cut(self, reason: str, t_ns: int) -> None:
        """The connection closed before the body's framing ended: the response is over,
        incomplete."""
        self._cut = reason
        self.on_end(t_ns)

    def on_end(self, t_ns: int) -> None:
        raise NotImplementedError

    def _keep_error(self, data: bytes) -> None:
        """Keep the first :data:`MAX_ERROR_BODY` bytes of an error answer's body."""
        kept = self._error_body
        assert kept is not None
        kept += data[: MAX_ERROR_BODY - len(kept)]

    def _end_error(self) -> bool:
        if self._error_body is None:
            return False
        body = self._error_body.decode("utf-8", "replace").strip()
        cut = f" (cut short: {self._cut})" if self._cut else ""
        status = self.response.status
        said = self._said(body)
        if said is None:
            self.response.error = f"HTTP {status}: {body[:300]}{cut}"
        else:  # a 4xx is the request refused (a parameter, a model): its words say which
            refused = "the server refused the request: " if 400 <= status < 500 else ""
            self.response.error = f"HTTP {status}: {refused}{said[:300]}{cut}"
        return True

    def _said(self, body: str) -> str | None:
        """An error body's error object in the protocol's words (its decoder reads it as it
        reads an error event), or None when the body is not one."""
        try:
            obj = orjson.loads(body)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(obj, dict):
            return None
        scratch = Response()
        self._decode(scratch, obj, 0)
        return scratch.error

    def _check_ending(self, *, stream: bool, note: str = "") -> None:
        """A 2xx answer without another error must have ended as its protocol ends."""
        response, ending = self.response, self._ending
        if response.error is not None:
            return
        if self._cut is not None:
            how = f"the connection closed mid-body ({self._cut})"
        elif self._until_close:
            how = "the server closed the connection"
        else:
            how = "the stream ended" if stream else "the body ended"
        cut = self._cut is not None
        if ending is not None:
            response.error = cut_short(response, ending, stream=stream, how=how + note, cut=cut)
        elif cut:
            response.error = f"response body cut short: {how}"
        if response.error is None:
            response.error = self._check_claims()

    def _check_claims(self) -> str | None:
        """Why the complete answer's own claims cannot be true (None when they can)."""
        response, limits = self.response, self._limits
        if response.top_index >= limits.choices:
            asked = plural(limits.choices, "choice")
            return (
                f"a choice with index {response.top_index} in the answer to a request for {asked}"
            )
        return counts.check(response, limits)


class StreamSink(_Sink):
    """Parses an SSE body event by event; each event's JSON goes to the decoder with the
    time its bytes were read."""

    __slots__ = ("_sse",)

    def __init__(
        self,
        decode: Decoder,
        *,
        keep_raw: bool = False,
        ending: Ending | None = None,
        limits: Limits = NO_LIMITS,
    ) -> None:
        super().__init__(decode, keep_raw=keep_raw, ending=ending, limits=limits)
        self._sse = SseParser()

    def on_data(self, data: bytes, t_ns: int) -> None:
        if self._error_body is not None:
            self._keep_error(data)
            return
        response, decode = self.response, self._decode
        payloads = self._sse.feed(data)
        if not payloads and self._sse.too_long and response.error is None:
            response.error = f"stream event over {MAX_EVENT >> 20} MiB without its end"
        for payload in payloads:
            if response.ended:  # the stream had ended: nothing more is part of the answer
                self._after_end(payload)
                continue
            if payload == b"[DONE]":
                response.ended = True
                continue
            response.events += 1
            try:
                obj = orjson.loads(payload)
            except ValueError:
                response.error = f"undecodable stream event: {payload[:200]!r}"
                continue
            if self.keep_raw:
                response.raw.append(obj)
            try:
                decode(response, obj, t_ns)
            except Exception as exc:  # JSON, not in the protocol's shape: the server's error
                self._unreadable(exc, obj)

    def _after_end(self, payload: bytes) -> None:
        marker = self._ending.marker if self._ending else "data: [DONE]"
        if payload == b"[DONE]":
            what = "a second data: [DONE]"
        else:
            what = f"an event ({payload[:160].decode('utf-8', 'replace')})"
        self.response.error = f"{what} after {marker}, the end of the stream"

    def _unreadable(self, exc: Exception, obj: Any) -> None:
        """A stream event its decoder cannot read (``choices`` not a list, a token that is
        not an object, …) is the response's error; later events are still read."""
        what = f"{type(exc).__name__}: {exc}"
        self.response.error = f"unreadable stream event ({what}): {str(obj)[:200]}"

    def on_end(self, t_ns: int) -> None:
        response = self.response
        response.t_done_ns = t_ns
        if not self._end_error():
            response.text = "".join([text for _, text in response.chunks])
            note = " inside an unfinished event" if self._sse.pending else ""
            self._check_ending(stream=True, note=note)


class BodySinkJson(_Sink):
    """Buffers a whole (non-streamed) JSON body and decodes it once at the end; the body's
    arrival time is the one content timestamp."""

    __slots__ = ("_parts", "_size")

    def __init__(
        self,
        decode: Decoder,
        *,
        keep_raw: bool = True,
        ending: Ending | None = None,
        limits: Limits = NO_LIMITS,
    ) -> None:
        super().__init__(decode, keep_raw=keep_raw, ending=ending, limits=limits)
        self._parts: list[bytes] = []
        self._size = 0

    def on_data(self, data: bytes, t_ns: int) -> None:
        if self._error_body is not None:
            self._keep_error(data)
        elif self._size <= MAX_BODY:  # past it, nothing more is kept (on_end says why)
            self._parts.append(data)
            self._size += len(data)

    def on_end(self, t_ns: int) -> None:
        response = self.response
        response.t_done_ns = t_ns
        if self._end_error():
            return
        if self._size > MAX_BODY:
            response.error = f"response body over {MAX_BODY >> 20} MiB: no answer is that long"
            return
        if self._cut is not None:  # never decode part of a body as if it were the answer
            self._check_ending(stream=False)
            return
        try:
            obj = orjson.loads(b"".join(self._parts))
        except ValueError as exc:
            cut = " (the server closed the connection inside it?)" if self._until_close else ""
            response.error = f"undecodable response body{cut}: {exc}"
            return
        if self.keep_raw:
            response.raw.append(obj)
        response.ended = True
        try:
            self._decode(response, obj, t_ns)
        except Exception as exc:  # JSON, not in the protocol's shape: the server's error
            response.error = f"unreadable response body ({type(exc).__name__}: {exc})"
            return
        response.text = "".join([text for _, text in response.chunks])
        self._check_ending(stream=False)


#: Either sink; both satisfy :class:`~testbed.clients.http.BodySink`.
Sink = StreamSink | BodySinkJson

#: The streamed sink protocol modules make (see the module's docstring).
STREAM_SINK: type[StreamSink] = StreamSink
if compiled is not None:
    whole_event = compiled.whole_event

    class CompiledStreamSink(StreamSink):
        """:class:`StreamSink` whose hot path splits and parses the read in C
        (``_readpath.whole_event``: bytes in, the one event's JSON or None out)."""

        __slots__ = ()

        def on_data(self, data: bytes, t_ns: int) -> None:
            response = self.response
            # Between events, no error body, the stream not ended (what follows its end is
            # an error StreamSink.on_data words): one whole event is read here.
            if self._error_body is None and not response.ended and not self._sse.partial:
                obj = whole_event(data)
                if obj is not None:
                    response.events += 1
                    if self.keep_raw:
                        response.raw.append(obj)
                    try:
                        self._decode(response, obj, t_ns)
                    except Exception as exc:  # JSON, not in the protocol's shape
                        self._unreadable(exc, obj)
                    return
            StreamSink.on_data(self, data, t_ns)

    STREAM_SINK = CompiledStreamSink
