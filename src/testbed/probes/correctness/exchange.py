"""One request of a case over one protocol: the body sent, and everything that came back.

Bodies are built from the case's neutral :class:`RequestSpec` (OpenAI completions or chat,
TGI ``/generate``, or a TGIS ``Generate`` request sent over gRPC), sent with the protocol
clients of :mod:`testbed.clients`, and the answer is kept twice: decoded into an
:class:`Output`, and as the raw event payloads of a stream so that :mod:`stream_check` can
judge the stream itself. The protocol client checks what the server claims against the
request's limits (``max_tokens``, ``n``; :mod:`testbed.clients.counts`) as the load probe's
does: a unary answer's error is its output's, a streamed answer's is the first of its stream
problems — cut short, counts that cannot be true, an error event, content after the finish
reason — in the client's words. When no answer came the client's own exception goes through
(:mod:`testbed.clients.http_errors`: a connect error, a timeout, a protocol error — each an
infrastructure error: the case is ERROR, not FAIL), and an answer cut short by a server that
then accepts no new connection (it was killed or evicted mid-answer) is a
:class:`~testbed.clients.http_errors.ConnectError`; one cut short by a server that lives on is
the server's: FAIL.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from testbed.clients import openai, tgi, tgis
from testbed.clients.http import ConnectError, ConnectionPool, ReadTimeout
from testbed.clients.response import Response, Sink
from testbed.clients.sse import SseParser
from testbed.clients.tgis import TgisPool
from testbed.core.clock import monotonic_ns
from testbed.probes.correctness.cases import ProtocolName, RequestSpec
from testbed.probes.correctness.outputs import ErrorOutput, Output, error_message, tgis_output
from testbed.probes.correctness.outputs import openai_output as _openai_output
from testbed.probes.correctness.outputs import tgi_output as _tgi_output


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


def openai_body(spec: RequestSpec, model: str, logprobs: int | None) -> dict[str, Any]:
    """The OpenAI completions (or chat) body of ``spec``."""
    body: dict[str, Any] = {"model": model} if model else {}
    if spec.messages is not None:
        body["messages"] = [m.model_dump() for m in spec.messages]
        if logprobs is not None:
            body["logprobs"] = True
            body["top_logprobs"] = logprobs
    else:
        body["prompt"] = spec.prompt
        if logprobs is not None:
            body["logprobs"] = logprobs
    if spec.max_new_tokens is not None:
        body["max_tokens"] = spec.max_new_tokens
    body["temperature"] = spec.temperature
    for name in ("seed", "top_p", "top_k", "stop", "ignore_eos"):
        value = getattr(spec, name)
        if value is not None:
            body[name] = value
    body.update(spec.extra)
    return body


def tgi_body(spec: RequestSpec, logprobs: int | None) -> dict[str, Any]:
    """The TGI ``/generate`` body of ``spec`` (greedy unless temperature > 0)."""
    parameters: dict[str, Any] = {"details": True, "do_sample": not spec.greedy}
    if not spec.greedy:
        parameters["temperature"] = spec.temperature
    if spec.max_new_tokens is not None:
        parameters["max_new_tokens"] = spec.max_new_tokens
    for name in ("seed", "top_p", "top_k", "ignore_eos"):
        value = getattr(spec, name)
        if value is not None:
            parameters[name] = value
    if spec.stop:
        parameters["stop"] = spec.stop
    if logprobs:
        parameters["top_n_tokens"] = logprobs
    parameters.update(spec.extra)
    return {"inputs": spec.prompt, "parameters": parameters}


def tgis_body(spec: RequestSpec, model: str, logprobs: int | None) -> dict[str, Any]:
    """The TGIS ``Generate`` request of ``spec`` (proto field names; greedy unless
        temperature > 0). ``ignore_eos`` becomes ``min_new_tokens`` = ``max_new_tokens``, TGIS's
        way to get exact lengths; ``extra`` goes into ``params`` (TGI's parameter names where TGIS
    keeps them)."""
    params: dict[str, Any] = {"method": "GREEDY" if spec.greedy else "SAMPLE"}
    if not spec.greedy:
        sampling: dict[str, Any] = {"temperature": spec.temperature}
        for name in ("seed", "top_p", "top_k"):
            if getattr(spec, name) is not None:
                sampling[name] = getattr(spec, name)
        params["sampling"] = sampling
    stopping: dict[str, Any] = {}
    if spec.max_new_tokens is not None:
        stopping["max_new_tokens"] = spec.max_new_tokens
        if spec.ignore_eos:
            stopping["min_new_tokens"] = spec.max_new_tokens
    if spec.stop:
        stopping["stop_sequences"] = list(spec.stop)
    if stopping:
        params["stopping"] = stopping
    if logprobs is not None:
        params["response"] = {
            "generated_tokens": True,
            "token_logprobs": True,
            "top_n_tokens": logprobs,
        }
    _extra(params, spec.extra)
    return {"model_id": model, "requests": [{"text": spec.prompt}], "params": params}


#: TGI parameter names in ``extra`` and where TGIS keeps them, so a case's ``extra`` (a bad
#: temperature, say) means the same on both protocols; other keys are ``Parameters`` fields.
_TGIS_PLACES = {
    "temperature": "sampling",
    "top_k": "sampling",
    "top_p": "sampling",
    "typical_p": "sampling",
    "seed": "sampling",
    "max_new_tokens": "stopping",
    "min_new_tokens": "stopping",
    "repetition_penalty": "decoding",
}


def _extra(params: dict[str, Any], extra: dict[str, Any]) -> None:
    for key, value in extra.items():
        place = _TGIS_PLACES.get(key)
        if place is None:
            params[key] = value
            continue
        params.setdefault(place, {})[key] = value
        if place == "sampling":
            params["method"] = "SAMPLE"


def build_body(
    protocol: ProtocolName, spec: RequestSpec, model: str, logprobs: int | None
) -> dict[str, Any]:
    if protocol == "openai":
        return openai_body(spec, model, logprobs)
    if protocol == "tgis":
        return tgis_body(spec, model, logprobs)
    return tgi_body(spec, logprobs)


def decode(protocol: ProtocolName, objects: list[Any]) -> Output:
    if protocol == "tgis":
        return tgis_output(objects)
    return _openai_output(objects) if protocol == "openai" else _tgi_output(objects)


async def send_tgis(
    pool: TgisPool, body: dict[str, Any], *, stream: bool, timeout_s: float
) -> Exchange:
    """:func:`send` over gRPC: the messages are kept as mappings (a stream's also as the
    JSON payloads :mod:`stream_check` reads)."""
    capture = tgis.sink(stream=stream, keep_raw=True, limits=tgis.limits_of(body))
    started = monotonic_ns()
    try:
        await pool.send(tgis.encode(body, stream=stream), capture, timeout_s)
    except ReadTimeout as exc:  # the same kind, its message naming the setting
        raise ReadTimeout(f"no complete answer within {timeout_s:g} s (timeout_s)") from exc
    response = capture.response
    exchange = Exchange("tgis", stream, body, Output(), response.status)
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
    protocol: ProtocolName,
    body: dict[str, Any],
    *,
    chat: bool,
    stream: bool,
    timeout_s: float,
) -> Exchange:
    """Send ``body`` once and return the exchange; the client's error when no answer.
    ``pool`` is the gRPC channel for tgis, the HTTP pool otherwise."""
    if isinstance(pool, TgisPool):
        return await send_tgis(pool, body, stream=stream, timeout_s=timeout_s)
    if protocol == "openai":
        api: openai.Api = "chat" if chat else "completions"
        payload = openai.encode(pool, api, body, stream=stream)
        limits = openai.limits_of(body)
        capture = _Capture(openai.sink(stream=stream, keep_raw=True, limits=limits), stream)
    else:
        payload = tgi.encode(pool, body, stream=stream)
        limits = tgi.limits_of(body)
        capture = _Capture(tgi.sink(stream=stream, keep_raw=True, limits=limits), stream)
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
    exchange = Exchange(protocol, stream, body, Output(), capture.status)
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
    exchange.output = _unfinished(decode(protocol, objects), response, stream)
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
