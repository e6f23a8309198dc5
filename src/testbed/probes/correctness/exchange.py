"""One request of a case over one protocol: the body sent, and everything that came back.

Bodies are built from the case's neutral :class:`RequestSpec` (OpenAI completions or chat,
or TGI ``/generate``), sent with the protocol clients of :mod:`testbed.clients`, and the
answer is kept twice: decoded into an :class:`Output`, and as the raw event payloads of a
stream so that :mod:`stream_check` can judge the stream itself. Connection failures and
timeouts raise :class:`Unreachable` (an infrastructure error: the case is ERROR, not FAIL).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from testbed.clients import openai, tgi
from testbed.clients.http import ConnectionPool, HttpClientError
from testbed.clients.response import Sink
from testbed.clients.sse import SseParser
from testbed.core.clock import monotonic_ns
from testbed.core.errors import InfrastructureError
from testbed.probes.correctness.cases import ProtocolName, RequestSpec
from testbed.probes.correctness.outputs import ErrorOutput, Output, error_message
from testbed.probes.correctness.outputs import openai_output as _openai_output
from testbed.probes.correctness.outputs import tgi_output as _tgi_output


class Unreachable(InfrastructureError):
    """The server did not answer: connection refused or closed, or no answer in time."""


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
        if self.stream and 200 <= self.status < 300:
            tail = self._sse.feed(b"\n\n")  # an event the server never finished
            self.incomplete = bool(tail)
            self.payloads.extend(tail)
        self.inner.on_end(t_ns)


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


def build_body(
    protocol: ProtocolName, spec: RequestSpec, model: str, logprobs: int | None
) -> dict[str, Any]:
    if protocol == "openai":
        return openai_body(spec, model, logprobs)
    return tgi_body(spec, logprobs)


def decode(protocol: ProtocolName, objects: list[Any]) -> Output:
    return _openai_output(objects) if protocol == "openai" else _tgi_output(objects)


async def send(
    pool: ConnectionPool,
    protocol: ProtocolName,
    body: dict[str, Any],
    *,
    chat: bool,
    stream: bool,
    timeout_s: float,
) -> Exchange:
    """Send ``body`` once and return the exchange; :class:`Unreachable` when no answer."""
    if protocol == "openai":
        api: openai.Api = "chat" if chat else "completions"
        payload = openai.encode(pool, api, body, stream=stream)
        capture = _Capture(openai.sink(stream=stream, keep_raw=True), stream)
    else:
        payload = tgi.encode(pool, body, stream=stream)
        capture = _Capture(tgi.sink(stream=stream, keep_raw=True), stream)
    started = monotonic_ns()
    try:
        await pool.send(payload, capture, timeout_s)
    except HttpClientError as exc:
        raise Unreachable(str(exc)) from exc
    except TimeoutError as exc:
        raise Unreachable(f"no complete answer within {timeout_s:g} s (timeout_s)") from exc
    response = capture.inner.response
    exchange = Exchange(protocol, stream, body, Output(), capture.status)
    exchange.duration_ms = round((monotonic_ns() - started) / 1e6, 3)
    if not 200 <= capture.status < 300:
        message = error_message(b"".join(capture.body))
        exchange.output = Output(error=ErrorOutput(capture.status, message))
        return exchange
    exchange.payloads = capture.payloads
    exchange.incomplete_tail = capture.incomplete
    objects = response.raw
    if not stream and not objects:
        message = response.error or "the body is not JSON"
        exchange.output = Output(error=ErrorOutput(capture.status, message))
        return exchange
    exchange.output = decode(protocol, objects)
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
