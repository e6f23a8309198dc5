"""The TGIS protocol: ``fmaas.GenerationService`` over gRPC (tgis-tester's subject).

``Generate`` answers whole (a batch of prompts; testbed sends one), ``GenerateStream`` a
message per token (the first one carries only ``input_token_count``), ``Tokenize`` and
``ModelInfo`` describe the model. The schema is testbed's wire-compatible copy in
:mod:`testbed.proto.fmaas`; protobuf and hpack are the ``tgis`` extra.

A request is written as a plain mapping in the proto's field names (what case files, records
and goldens hold), e.g.::

    {"model_id": "m", "requests": [{"text": "Hello"}],
     "params": {"method": "GREEDY", "stopping": {"max_new_tokens": 8},
                "response": {"generated_tokens": true, "token_logprobs": true}}}

:func:`encode` turns it into the bytes of a ``BatchedGenerationRequest`` (or, streamed, of a
``SingleGenerationRequest`` with the first prompt), once, before a load test starts.
:class:`TgisPool` sends such bytes over one HTTP/2 connection (testbed's own gRPC client,
:mod:`testbed.clients.grpc_channel`) and feeds a :class:`TgisSink`,
which fills the same :class:`~testbed.clients.response.Response` as the HTTP protocols: one
content chunk per message with text, the server's counts as OpenAI-shaped ``usage``
(``prompt_tokens`` = ``input_token_count``, ``completion_tokens`` =
``generated_token_count``), and the stop reason under TGI's names (``length``,
``eos_token``, ``stop_sequence`` …). A gRPC error status becomes ``Response.error`` with an
HTTP-like ``status`` (INVALID_ARGUMENT 400, NOT_FOUND 404, RESOURCE_EXHAUSTED 429,
UNAVAILABLE 503, others 500); a server that cannot be reached (or a connection that closes
before any message came) raises the client's :class:`~testbed.clients.http_errors.ConnectError`
(or :class:`~testbed.clients.http_errors.RemoteProtocolError`), a deadline a
:class:`~testbed.clients.http_errors.ReadTimeout` — as the HTTP pool does.
An answer that ends (status OK) without a stop reason — a stream closed before its last
message — was cut short: that is ``Response.error`` too, the server's error of the request;
so are counts that cannot be true (:mod:`~testbed.clients.counts`: ``generated_token_count``
over the request's ``max_new_tokens``, or fewer than the messages that carried text).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from testbed.clients import counts
from testbed.clients.counts import NO_LIMITS, Limits, plural, whole_number
from testbed.clients.endpoint import Endpoint
from testbed.clients.grpc_channel import GrpcChannel, GrpcError
from testbed.clients.http_errors import (
    ConnectError,
    ConnectTimeout,
    ReadTimeout,
    RemoteProtocolError,
)
from testbed.clients.response import Response
from testbed.core.clock import monotonic_ns
from testbed.core.errors import InfrastructureError, InputError, MissingDependency
from testbed.core.secrets import resolve

SERVICE = "fmaas.GenerationService"
#: StopReason → the finish reason testbed records (TGI's names where TGI has one).
FINISH = {
    "MAX_TOKENS": "length",
    "EOS_TOKEN": "eos_token",
    "STOP_SEQUENCE": "stop_sequence",
    "TIME_LIMIT": "time_limit",
    "TOKEN_LIMIT": "token_limit",
    "CANCELLED": "cancelled",
    "ERROR": "error",
}
#: gRPC status code name → the HTTP status a record carries.
HTTP_STATUS = {
    "INVALID_ARGUMENT": 400,
    "FAILED_PRECONDITION": 400,
    "OUT_OF_RANGE": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "NOT_FOUND": 404,
    "RESOURCE_EXHAUSTED": 429,
    "UNIMPLEMENTED": 501,
    "UNAVAILABLE": 503,
}


#: Seconds a load stage waits for its gRPC channel to connect.
CONNECT_TIMEOUT_S = 10.0


def modules() -> Any:
    """``generation_pb2`` (protobuf's messages of the schema), or the install hint; the
    gRPC client (:mod:`testbed.clients.grpc_channel`) needs ``hpack`` too."""
    try:
        import hpack  # noqa: F401

        from testbed.proto.fmaas import generation_pb2
    except ImportError as exc:
        raise MissingDependency("hpack" if exc.name == "hpack" else "protobuf", "tgis") from exc
    return generation_pb2


def request_message(body: dict[str, Any], *, stream: bool) -> Any:
    """The protobuf message of ``body`` (proto field names); a streamed request carries the
    first prompt of ``requests``."""
    pb = modules()
    from google.protobuf import json_format

    data = dict(body)
    if stream:
        prompts = data.pop("requests", None) or [{}]
        if len(prompts) != 1:
            raise InputError("a streamed TGIS request carries exactly one prompt")
        data["request"] = prompts[0]
        target = pb.SingleGenerationRequest()
    else:
        target = pb.BatchedGenerationRequest()
    try:
        return json_format.ParseDict(data, target)
    except json_format.ParseError as exc:
        raise InputError(f"not a TGIS generation request: {exc}") from exc


def encode(body: dict[str, Any], *, stream: bool) -> bytes:
    """The wire bytes of one request (build once, send many times in a load test)."""
    return bytes(request_message(body, stream=stream).SerializeToString())


def _tokens(items: Any) -> list[dict[str, Any]]:
    return [
        {
            "text": t.text,
            "logprob": t.logprob,
            "rank": t.rank,
            "top_tokens": [{"text": x.text, "logprob": x.logprob} for x in t.top_tokens],
        }
        for t in items
    ]


def response_dict(message: Any) -> dict[str, Any]:
    """A ``GenerationResponse`` as a plain mapping (every field, enum names as strings)."""
    pb = modules()
    return {
        "input_token_count": message.input_token_count,
        "generated_token_count": message.generated_token_count,
        "text": message.text,
        "stop_reason": pb.StopReason.Name(message.stop_reason),
        "stop_sequence": message.stop_sequence,
        "seed": message.seed,
        "tokens": _tokens(message.tokens),
        "input_tokens": _tokens(message.input_tokens),
    }


class TgisSink:
    """Reads ``GenerationResponse`` messages into a :class:`Response` as they arrive."""

    __slots__ = ("keep_raw", "limits", "response", "stream")

    def __init__(self, *, stream: bool, keep_raw: bool = False, limits: Limits = NO_LIMITS) -> None:
        self.response = Response()
        self.stream = stream
        self.keep_raw = keep_raw
        self.limits = limits

    def on_sent(self, t_ns: int) -> None:
        self.response.t_sent_ns = t_ns

    def on_message(self, message: Any, t_ns: int) -> None:
        response = self.response
        if not response.t_first_byte_ns:
            response.t_first_byte_ns = t_ns
            response.status = 200
        response.events += 1
        if message.text:
            response.chunks.append((t_ns, message.text))
        usage = response.usage or {}
        if message.input_token_count:
            usage["prompt_tokens"] = message.input_token_count
        if message.generated_token_count or "completion_tokens" in usage or not self.stream:
            usage["completion_tokens"] = message.generated_token_count
        response.usage = usage
        if message.stop_reason:
            pb = modules()
            name = pb.StopReason.Name(message.stop_reason)
            response.finish_reason = FINISH.get(name, name.lower())
            response.ended = True
        if self.keep_raw:
            response.raw.append(response_dict(message))

    def on_error(self, code: str, details: str, t_ns: int) -> None:
        response = self.response
        response.status = HTTP_STATUS.get(code, 500)
        response.error = f"gRPC {code}: {details}"
        response.t_first_byte_ns = response.t_first_byte_ns or t_ns

    def on_end(self, t_ns: int) -> None:
        response = self.response
        response.t_done_ns = t_ns
        response.text = "".join([text for _, text in response.chunks])
        if response.error is None and not response.ended:
            if self.stream:
                response.error = (
                    f"stream cut short: the stream ended after"
                    f" {plural(len(response.chunks), 'text chunk')}"
                    f" ({plural(response.events, 'message')}), without a stop_reason"
                )
            else:
                response.error = "answer without a stop_reason (NOT_FINISHED)"
            response.status = response.status or 200
        if response.error is None:
            response.error = counts.check(response, self.limits)


def limits_of(body: dict[str, Any]) -> Limits:
    """What a request (proto field names) allows: ``params.stopping.max_new_tokens``."""
    params = body.get("params")
    stopping = params.get("stopping") if isinstance(params, dict) else None
    most = stopping.get("max_new_tokens") if isinstance(stopping, dict) else None
    return Limits(whole_number(most))


def sink(*, stream: bool, keep_raw: bool = False, limits: Limits = NO_LIMITS) -> TgisSink:
    """A fresh sink for a TGIS answer, its counts checked against ``limits``."""
    return TgisSink(stream=stream, keep_raw=keep_raw, limits=limits)


def stream_reader(sink: TgisSink) -> Callable[[bytes, int], None]:
    """What a ``GenerateStream`` call hands each message's bytes to: decoded, into ``sink``
    (called inside the connection's ``data_received``, with the time the bytes were read)."""
    decode, on_message = modules().GenerationResponse.FromString, sink.on_message

    def each(data: bytes, t_ns: int) -> None:
        on_message(decode(data), t_ns)

    return each


class TgisPool:
    """Calls to ``target`` (``host:port``) multiplexed over one HTTP/2 connection
    (:class:`~testbed.clients.grpc_channel.GrpcChannel`, on the event loop).

    ``api_key`` (resolved, never logged) goes out as ``authorization: Bearer …`` metadata,
    ``metadata`` (lower-case names) with every call too.
    """

    def __init__(
        self,
        target: str,
        *,
        api_key: str | None = None,
        metadata: tuple[tuple[str, str], ...] = (),
    ) -> None:
        pb = modules()
        self.target = target
        if api_key:
            metadata = (("authorization", f"Bearer {api_key}"), *metadata)
        try:
            self._channel = GrpcChannel(target, metadata=metadata)
        except ValueError as exc:
            raise InputError(f"{exc}; give the gRPC address as host:port") from exc
        self._batch_answer = pb.BatchedGenerationResponse.FromString

    async def send(
        self,
        payload: bytes,
        sink: TgisSink,
        timeout_s: float | None = None,
        request_id: str | None = None,
    ) -> int:
        """Send encoded ``payload``; feed the answer to ``sink``; return the send time (ns).
        ``request_id`` goes as ``x-request-id`` metadata."""
        t_sent = monotonic_ns()
        sink.on_sent(t_sent)
        try:
            if sink.stream:
                each = stream_reader(sink)
                path = f"/{SERVICE}/GenerateStream"
                await self._channel.call(path, payload, each, timeout_s, request_id)
            else:
                path = f"/{SERVICE}/Generate"
                data, t_ns = await self._channel.unary(path, payload, timeout_s, request_id)
                for message in self._batch_answer(data).responses[:1]:
                    sink.on_message(message, t_ns)
        except GrpcError as exc:
            self._failed(exc, sink)
        except TimeoutError as exc:  # the channel's wait for the whole call
            raise ReadTimeout(f"no complete answer within {timeout_s:g} s") from exc
        sink.on_end(monotonic_ns())
        return t_sent

    def _failed(self, exc: GrpcError, sink: TgisSink) -> None:
        if exc.code == "DEADLINE_EXCEEDED":
            raise ReadTimeout(exc.details) from exc
        if not exc.answered and not sink.response.events:
            # no answer at all: like an HTTP connection that failed or closed mid-response
            failure = ConnectError if exc.connecting else RemoteProtocolError
            what = "cannot connect to" if exc.connecting else "no answer from"
            raise failure(
                f"{what} {self.target}: {exc.details};"
                " is the server running with its gRPC port open?"
            ) from exc
        sink.on_error(exc.code, exc.details, monotonic_ns())

    async def tokenize(self, texts: list[str], *, return_tokens: bool = False) -> Any:
        """``Tokenize``: the ``BatchedTokenizeResponse`` of ``texts``."""
        pb = modules()
        request = pb.BatchedTokenizeRequest(
            requests=[pb.TokenizeRequest(text=t) for t in texts], return_tokens=return_tokens
        )
        return pb.BatchedTokenizeResponse.FromString(await self._call("Tokenize", request))

    async def model_info(self, model_id: str = "") -> Any:
        """``ModelInfo``: kind, maximum sequence length, maximum new tokens."""
        pb = modules()
        answer = await self._call("ModelInfo", pb.ModelInfoRequest(model_id=model_id))
        return pb.ModelInfoResponse.FromString(answer)

    async def _call(self, method: str, request: Any, timeout_s: float = 10.0) -> bytes:
        try:
            data, _ = await self._channel.unary(
                f"/{SERVICE}/{method}", request.SerializeToString(), timeout_s
            )
        except GrpcError as exc:
            failed = TgisSink(stream=False)
            self._failed(exc, failed)  # raises when unreachable or too slow
            raise InfrastructureError(f"{self.target}: {failed.response.error}") from exc
        return data

    async def warm(self, connections: int) -> None:
        """Connect before a load stage starts (one connection carries every request),
        trying again while nothing listens yet; a server that does not take the
        connection within :data:`CONNECT_TIMEOUT_S` is unreachable."""
        del connections
        last, pause = "", 0.05
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                while True:
                    try:
                        await self._channel.connection()
                        return
                    except GrpcError as exc:
                        last = f" ({exc.details})"
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, 1.0)
        except TimeoutError:
            raise ConnectTimeout(
                f"cannot connect to {self.target}: no gRPC connection within"
                f" {CONNECT_TIMEOUT_S:g} s{last}; is the server running with its gRPC port open?"
            ) from None

    @property
    def open_connections(self) -> int:
        return 1

    async def aclose(self) -> None:
        await self._channel.aclose()


def pool_for(endpoint: Endpoint, metadata: tuple[tuple[str, str], ...] = ()) -> TgisPool:
    """A channel to ``endpoint``'s gRPC service (its API key and ``metadata`` with every
    call)."""
    if not endpoint.grpc_target:
        raise InputError(
            f"{endpoint.base_url} has no gRPC address for the tgis protocol; serve it with"
            " params.protocols including tgis (sim, hf) or give the deployment's grpc address"
        )
    key = resolve(endpoint.api_key) if endpoint.api_key else None
    return TgisPool(endpoint.grpc_target, api_key=key, metadata=metadata)
