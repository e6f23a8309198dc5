"""The TGIS dialect over gRPC: ``fmaas.GenerationService`` served by the simulator.

A gRPC call goes through the same app as an HTTP request — admission, the waiting queue,
faults, pacing against token deadlines, metrics — so ``protocols: [openai, tgi, tgis]``
simulates one server with three front doors. The pieces:

- :class:`TgisRequest`, a dialect like the OpenAI and TGI ones: it parses a
  ``SingleGenerationRequest`` and renders each answer as JSON lines in the proto's field
  names — a first message with ``input_token_count``, one per token (``text``, cumulative
  ``generated_token_count``), the stop reason on the last;
- :class:`GrpcConnection`, what the app writes to (the HTTP connection's interface), which
  turns those lines into ``GenerationResponse`` messages for the call, and the call's
  cancellation into the connection's loss;
- :class:`SimServicer`, the four methods, started on the app's event loop by
  :func:`start_grpc`.

TGIS semantics kept: ``max_new_tokens`` 0 means 20; ``min_new_tokens`` > 0 disables the
simulator's early stop (the ``ignore_eos`` of the other dialects); ``input_text`` prepends the
prompt; ``generated_tokens`` lists each token with its logprob. Refusals become gRPC status
codes (400/422 INVALID_ARGUMENT, 404 NOT_FOUND, 503 UNAVAILABLE — starting, or the waiting
queue full — other INTERNAL); the disconnect fault aborts the call with UNAVAILABLE.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any, cast

from testbed.config.sim import SimParams
from testbed.servers import grpc_server
from testbed.servers.sim.dialect import BadRequest, GenerationRequest
from testbed.servers.sim.http import Connection, Request
from testbed.servers.sim.text import LOGPROBS, Generation, count_tokens

if TYPE_CHECKING:
    from testbed.servers.sim.app import SimApp

DEFAULT_MAX_NEW_TOKENS = 20  # TGIS's default when the request says 0
MAX_NEW_TOKENS = 1024  # what ModelInfo reports
_STOP = {"length": "MAX_TOKENS", "eos": "EOS_TOKEN", "stop_sequence": "STOP_SEQUENCE"}


class TgisRequest(GenerationRequest):
    """One prompt of ``Generate`` or the prompt of ``GenerateStream``."""

    def __init__(self, params: SimParams, *, options: dict[str, bool], **fields: Any) -> None:
        super().__init__(params, **fields)
        self.options = options

    @classmethod
    def parse(cls, body: bytes, params: SimParams, *, stream: bool = False) -> TgisRequest:
        """``body`` is a serialized ``SingleGenerationRequest``."""
        from testbed.proto.fmaas import generation_pb2 as pb

        msg = pb.SingleGenerationRequest.FromString(body)
        p = msg.params
        if p.stopping.max_new_tokens > MAX_NEW_TOKENS:
            raise BadRequest(f"max_new_tokens must be at most {MAX_NEW_TOKENS}", "max_new_tokens")
        seed = p.sampling.seed if p.sampling.HasField("seed") else None
        return cls(
            params,
            options={
                "input_text": p.response.input_text,
                "generated_tokens": p.response.generated_tokens,
                "token_logprobs": p.response.token_logprobs,
            },
            prompt=msg.request.text,
            max_tokens=p.stopping.max_new_tokens or DEFAULT_MAX_NEW_TOKENS,
            stream=stream,
            ignore_eos=p.stopping.min_new_tokens > 0,
            stop=tuple(p.stopping.stop_sequences),
            seed=seed,
        )

    def _token(self, tid: int, text: str) -> dict[str, Any]:
        token: dict[str, Any] = {"text": text}
        if self.options["token_logprobs"]:
            token["logprob"] = LOGPROBS[tid]
        return token

    def _final(self, gen: Generation, message: dict[str, Any]) -> dict[str, Any]:
        message["stop_reason"] = _STOP[gen.finish_reason]
        if gen.finish_reason == "stop_sequence":
            message["stop_sequence"] = next((s for s in self.stop if s), "")
        if self.seed is not None:
            message["seed"] = self.seed
        return message

    def events(self, gen: Generation) -> list[str]:
        out = []
        head: dict[str, Any] = {"input_token_count": self.prompt_tokens}
        if self.options["input_text"]:
            head["text"] = self.prompt
        n = len(gen.ids)
        for i, (tid, text) in enumerate(zip(gen.ids, gen.texts, strict=True), start=1):
            message: dict[str, Any] = {"text": text, "generated_token_count": i}
            if self.options["generated_tokens"]:
                message["tokens"] = [self._token(tid, text)]
            if i == n:
                self._final(gen, message)
            out.append(json.dumps(message) + "\n")
        out[0] = json.dumps(head) + "\n" + out[0] if out else json.dumps(head) + "\n"
        return out

    def whole(self, gen: Generation) -> bytes:
        message: dict[str, Any] = {
            "input_token_count": self.prompt_tokens,
            "generated_token_count": len(gen.ids),
            "text": (self.prompt if self.options["input_text"] else "") + gen.text,
        }
        if self.options["generated_tokens"]:
            message["tokens"] = [self._token(t, x) for t, x in zip(gen.ids, gen.texts, strict=True)]
        return json.dumps(self._final(gen, message)).encode()

    @staticmethod
    def error_body(status: int, message: str, param: str | None = None) -> bytes:
        return json.dumps({"status": status, "message": message}).encode()


class GrpcConnection:
    """The app's view of one gRPC call (the methods of the HTTP ``Connection`` it uses)."""

    def __init__(self) -> None:
        self.items: asyncio.Queue[tuple[str, bytes, int]] = asyncio.Queue()
        self.on_lost: Any = None
        self.finished = False

    @property
    def open(self) -> bool:
        return not self.finished

    def respond(self, status: int, body: bytes, content_type: bytes = b"") -> None:
        self.items.put_nowait(("whole" if status == 200 else "error", body, status))

    def start_stream(self, content_type: bytes, first: bytes = b"", last: bool = False) -> None:
        self.send(first, last)

    def send(self, data: bytes, last: bool = False) -> None:
        if data:
            self.items.put_nowait(("data", data, 200))
        if last:
            self.items.put_nowait(("end", b"", 200))

    def drop(self) -> None:
        self.on_lost = None
        self.items.put_nowait(("error", b'{"message": "the server dropped the call"}', 503))

    def lost(self) -> None:
        """The call ended early (the client cancelled, or the server stops)."""
        self.finished = True
        callback, self.on_lost = self.on_lost, None
        if callback is not None:
            callback()


_CODES = {400: "INVALID_ARGUMENT", 422: "INVALID_ARGUMENT", 404: "NOT_FOUND", 503: "UNAVAILABLE"}


async def _abort(context: Any, status: int, body: bytes) -> None:
    try:
        message = str(json.loads(body).get("message"))
    except ValueError:
        message = body.decode("utf-8", "replace")
    await context.abort(grpc_server.code(_CODES.get(status, "INTERNAL")), message)


def _message(line: bytes) -> Any:
    from google.protobuf import json_format

    from testbed.proto.fmaas import generation_pb2 as pb

    return json_format.Parse(line, pb.GenerationResponse())


class SimServicer:
    """``fmaas.GenerationService`` on the simulator's app (its loop, its state)."""

    def __init__(self, app: SimApp) -> None:
        self.app = app

    def _start(self, request: Any, stream: bool) -> GrpcConnection:
        conn = GrpcConnection()
        arrival = self.app.loop.time()
        body = request.SerializeToString()
        call = Request("POST", "grpc", {}, body, True, arrival)
        # Duck-typed: the app and its jobs only call the answering methods GrpcConnection has.
        self.app.serve(TgisRequest, stream, call, cast("Connection", conn))
        return conn

    async def GenerateStream(self, request: Any, context: Any) -> Any:
        conn = self._start(request, stream=True)
        try:
            while True:
                kind, data, status = await conn.items.get()
                if kind == "data":
                    for line in data.splitlines():
                        yield _message(line)
                elif kind == "end":
                    conn.finished = True
                    return
                elif kind == "drop":
                    conn.finished = True
                    await context.abort(
                        grpc_server.code("UNAVAILABLE"), "the server dropped the call"
                    )
                else:
                    conn.finished = True
                    await _abort(context, status, data)
        finally:
            if not conn.finished:
                conn.lost()

    async def Generate(self, request: Any, context: Any) -> Any:
        from testbed.proto.fmaas import generation_pb2 as pb

        conns = [
            self._start(
                pb.SingleGenerationRequest(
                    model_id=request.model_id, request=prompt, params=request.params
                ),
                stream=False,
            )
            for prompt in request.requests
        ]
        responses = []
        try:
            for conn in conns:
                kind, data, status = await conn.items.get()
                conn.finished = True
                if kind == "whole":
                    responses.append(_message(data))
                elif kind == "drop":
                    await context.abort(
                        grpc_server.code("UNAVAILABLE"), "the server dropped the call"
                    )
                else:
                    await _abort(context, status, data)
        finally:
            for conn in conns:
                if not conn.finished:
                    conn.lost()
        return pb.BatchedGenerationResponse(responses=responses)

    async def Tokenize(self, request: Any, context: Any) -> Any:
        from testbed.proto.fmaas import generation_pb2 as pb

        rule = self.app.params.tokenizer
        out = []
        for item in request.requests:
            pieces = _pieces(item.text, rule)
            response = pb.TokenizeResponse(token_count=count_tokens(item.text, rule))
            if request.return_tokens:
                response.tokens.extend(text for text, _, _ in pieces)
            if request.return_offsets:
                response.offsets.extend(
                    pb.TokenizeResponse.Offset(start=a, end=b) for _, a, b in pieces
                )
            out.append(response)
        return pb.BatchedTokenizeResponse(responses=out)

    async def ModelInfo(self, request: Any, context: Any) -> Any:
        from testbed.proto.fmaas import generation_pb2 as pb

        return pb.ModelInfoResponse(
            model_kind=pb.ModelInfoResponse.DECODER_ONLY,
            max_sequence_length=self.app.params.max_model_len or 8192,
            max_new_tokens=MAX_NEW_TOKENS,
        )


def _pieces(text: str, rule: str) -> list[tuple[str, int, int]]:
    """Each token's text and character offsets under the simulator's counting rule."""
    if rule == "chars4":
        return [(text[i : i + 4], i, min(len(text), i + 4)) for i in range(0, len(text), 4)]
    out, pos = [], 0
    for word in text.split():
        start = text.index(word, pos)
        pos = start + len(word)
        out.append((word, start, pos))
    return out


async def start_grpc(app: SimApp, host: str, port: int) -> tuple[Any, int]:
    """The simulator's gRPC server on ``host:port`` (0: a free port), in the running loop;
    the server and the port it bound."""
    return await grpc_server.start(SimServicer(app), host, port, "the simulator")
