"""One request of a case over one protocol: the body sent, and everything that came back.

Bodies are built from the case's neutral :class:`RequestSpec` by the API objects of
:mod:`testbed.clients.apis` (OpenAI completions or chat, TGI ``/generate``, or a TGIS
``Generate`` request sent over gRPC), which send them and decode the answer; it is kept
twice: decoded into an :class:`Output`, and as the raw event payloads of a stream so that
:mod:`stream_check` can judge the stream itself. The API's sink checks what the server
claims against the request's limits (``max_tokens``, ``n``; :mod:`testbed.clients.counts`)
as the load probe's does: a unary answer's error is its output's, a streamed answer's is the
first of its stream problems — cut short, counts that cannot be true, an error event,
content after the finish reason — in the client's words. When no answer came the client's
own exception goes through (:mod:`testbed.clients.http_errors`: a connect error, a timeout,
a protocol error — each an infrastructure error: the case is ERROR, not FAIL), and an answer
cut short by a server that then accepts no new connection (it was killed or evicted
mid-answer) is a :class:`~testbed.clients.http_errors.ConnectError`; one cut short by a
server that lives on is the server's: FAIL.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from testbed.clients.apis import Api, Request, of_protocol
from testbed.clients.http import ConnectError, ConnectionPool, ReadTimeout
from testbed.clients.response import Response, Sink
from testbed.clients.sse import SseParser
from testbed.clients.tgis import TgisPool, TgisSink
from testbed.core.clock import monotonic_ns
from testbed.probes.correctness.cases import ProtocolName, RequestSpec
from testbed.probes.correctness.outputs import (
    ErrorOutput,
    Output,
    error_message,
    openai_output,
    tgi_output,
    tgis_output,
)


@dataclass
class Exchange:
    """One request and its answer."""

    protocol: ProtocolName
    stream: bool
    body: dict[str, Any]
    output: Output
    status: int = 0
    payloads: list[bytes] = field(default_factory=list)  # raw SSE data, [DONE] included
    incomplete_tail: bool = False  # the stream ended inside an event
    #: what the client found wrong with a streamed answer, in its words: cut short before its
    #: terminator, or a claim that cannot be true (counts, an error event, content after the
    #: finish reason) — None when the client found it complete and possible
    stream_error: str | None = None
    duration_ms: float = 0.0


class _Capture:
    """Wraps a protocol sink: the client decodes as usual, and the raw stream payloads (or
    the whole body) are kept for the stream checks and error messages."""

    def __init__(self, inner: Sink, stream: bool) -> None:
        self.inner = inner
        self.stream = stream
        self.status = 0
        self.payloads: list[bytes] = []
        self.body: list[bytes] = []
        self.incomplete = False
        self._sse = SseParser()

    def on_sent(self, t_ns: int) -> None:
        self.inner.on_sent(t_ns)

    def on_head(self, status: int, headers: dict[str, str], t_ns: int) -> None:
        self.status = status
        self.inner.on_head(status, headers, t_ns)

    def on_data(self, data: bytes, t_ns: int) -> None:
        if self.stream and 200 <= self.status < 300:
            self.payloads.extend(self._sse.feed(data))
        else:
            self.body.append(data)
        self.inner.on_data(data, t_ns)

    def on_end(self, t_ns: int) -> None:
        self._flush()
        self.inner.on_end(t_ns)

    def on_cut(self, reason: str, t_ns: int) -> None:
        self._flush()
        self.inner.on_cut(reason, t_ns)

    def _flush(self) -> None:
        if self.stream and 200 <= self.status < 300:
            tail = self._sse.feed(b"\n\n")  # an event the server never finished
            self.incomplete = bool(tail) or self._sse.too_long
            self.payloads.extend(tail)


def api_of(protocol: ProtocolName, spec: RequestSpec) -> Api:
    """The API a case's request goes to over ``protocol`` (OpenAI's: chat or completions)."""
    return of_protocol(protocol, chat=spec.chat)


def request_of(spec: RequestSpec, model: str, logprobs: int | None) -> Request:
    """The case's request in the API objects' terms; ``logprobs``: the alternatives per
    token to ask (the case's, or the differential's), None for none."""
    messages = None if spec.messages is None else [m.model_dump() for m in spec.messages]
    return Request(
        spec.prompt or "",
        messages=messages,
        model=model,
        max_tokens=spec.max_new_tokens,
        temperature=spec.temperature,
        ignore_eos=spec.ignore_eos,
        seed=spec.seed,
        top_p=spec.top_p,
        top_k=spec.top_k,
        stop=spec.stop,
        logprobs=logprobs,
        extra=spec.extra,
    )


def build_body(api: Api, spec: RequestSpec, model: str, logprobs: int | None) -> dict[str, Any]:
    """The body of ``spec`` in ``api``'s words (greedy unless temperature > 0)."""
    return api.body(request_of(spec, model, logprobs))


#: What an answer's JSON objects (or TGIS's messages) decode to, by the endpoint protocol.
_OUTPUT: dict[ProtocolName, Callable[[list[Any]], Output]] = {
    "openai": openai_output,
    "tgi": tgi_output,
    "tgis": tgis_output,
}


def decode(protocol: ProtocolName, objects: list[Any]) -> Output:
    return _OUTPUT[protocol](objects)


async def send_tgis(
    pool: TgisPool, api: Api, body: dict[str, Any], *, stream: bool, timeout_s: float
) -> Exchange:
    """:func:`send` over gRPC: the messages are kept as mappings (a stream's also as the
    JSON payloads :mod:`stream_check` reads)."""
    capture = api.sink(stream=stream, keep_raw=True, limits=api.limits_of(body))
    assert isinstance(capture, TgisSink)
    started = monotonic_ns()
    try:
        await pool.send(api.encode(None, body, stream=stream), capture, timeout_s)
    except ReadTimeout as exc:  # the same kind, its message naming the setting
        raise ReadTimeout(f"no complete answer within {timeout_s:g} s (timeout_s)") from exc
    response = capture.response
    exchange = Exchange(api.protocol, stream, body, Output(), response.status)
    exchange.duration_ms = round((monotonic_ns() - started) / 1e6, 3)
    if response.error is not None and response.status != 200:  # a gRPC error status
        exchange.output = Output(error=ErrorOutput(response.status, response.error))
        return exchange
    if stream:  # a stream cut short is judged by the stream check, message by message
        exchange.payloads = [orjson.dumps(message) for message in response.raw]
        exchange.stream_error = response.error
    exchange.output = _unfinished(tgis_output(response.raw), response, stream)
    return exchange


def _unfinished(output: Output, response: Response, stream: bool) -> Output:
    """``output``, made an error when the client found the unary answer incomplete (no
    finish reason, body cut short) or its claims impossible (counts over the request's
    limits) and the decoded answer does not already carry one."""
    if not stream and output.error is None and response.error is not None:
        output.error = ErrorOutput(response.status, response.error)
    return output


async def send(
    pool: ConnectionPool | TgisPool,
    api: Api,
    body: dict[str, Any],
    *,
    stream: bool,
    timeout_s: float,
) -> Exchange:
    """Send ``body`` once and return the exchange; the client's error when no answer.
    ``pool`` is the gRPC channel for tgis, the HTTP pool otherwise."""
    if isinstance(pool, TgisPool):
        return await send_tgis(pool, api, body, stream=stream, timeout_s=timeout_s)
    payload = api.encode(pool, body, stream=stream)
    inner = api.sink(stream=stream, keep_raw=True, limits=api.limits_of(body))
    assert not isinstance(inner, TgisSink)
    capture = _Capture(inner, stream)
    started = monotonic_ns()
    try:
        await pool.send(payload, capture, timeout_s)
    except ReadTimeout as exc:  # the same kind, its message naming the setting
        raise ReadTimeout(f"no complete answer within {timeout_s:g} s (timeout_s)") from exc
    response = capture.inner.response
    if 200 <= capture.status < 300 and not response.ended and not await pool.reachable():
        # Killed or evicted mid-answer: the infrastructure's doing (ERROR), unlike an answer
        # cut short by a server that lives on (FAIL).
        raise ConnectError(f"{response.error}; then no new connection: the server went away")
    exchange = Exchange(api.protocol, stream, body, Output(), capture.status)
    exchange.duration_ms = round((monotonic_ns() - started) / 1e6, 3)
    if not 200 <= capture.status < 300:
        message = error_message(b"".join(capture.body))
        exchange.output = Output(error=ErrorOutput(capture.status, message))
        return exchange
    exchange.payloads = capture.payloads
    exchange.incomplete_tail = capture.incomplete
    exchange.stream_error = response.error if stream else None
    objects = response.raw
    if not stream and not objects:
        message = response.error or "the body is not JSON"
        exchange.output = Output(error=ErrorOutput(capture.status, message))
        return exchange
    exchange.output = _unfinished(decode(api.protocol, objects), response, stream)
    return exchange


def parse_payloads(payloads: list[bytes]) -> list[Any]:
    """The JSON objects of stream payloads (``[DONE]`` and undecodable ones left out)."""
    objects = []
    for payload in payloads:
        if payload.strip() == b"[DONE]":
            continue
        try:
            objects.append(orjson.loads(payload))
        except ValueError:
            continue
    return objects
