"""The TGIS dialect over gRPC: ``fmaas.GenerationService`` served by the simulator.

A gRPC call goes through the same app as an HTTP request — admission, the waiting queue,
faults, pacing against token deadlines, metrics — so ``protocols: [openai, tgi, tgis]``
simulates one server with three front doors. The pieces:

- :class:`TgisRequest`, a dialect like the OpenAI and TGI ones: it parses a
  ``SingleGenerationRequest`` and renders each answer as length-prefixed
  ``GenerationResponse`` messages — a first one with ``input_token_count``, one per token
  (``text``, cumulative ``generated_token_count``), the stop reason on the last;
- :class:`TgisAnswer`, what the app writes to (the HTTP connection's interface), which
  hands those messages to the call, a refusal as its status, and the call's cancellation
  to the app as the connection's loss;
- :class:`SimTgis`, the four methods, served on the app's event loop by the simulator's
  own HTTP/2 server (:mod:`testbed.servers.sim.h2`, started by :func:`start_grpc`).

TGIS semantics kept: ``max_new_tokens`` 0 means 20; ``min_new_tokens`` > 0 disables the
simulator's early stop (the ``ignore_eos`` of the other dialects); ``input_text`` prepends the
prompt; ``generated_tokens`` lists each token with its logprob. Refusals become gRPC status
codes (400/422 INVALID_ARGUMENT, 404 NOT_FOUND, the waiting queue full RESOURCE_EXHAUSTED as
TGIS answers an overload, 503 (starting) UNAVAILABLE, other INTERNAL); the disconnect fault
ends the call with UNAVAILABLE, the malformed-chunk fault sends a message no protobuf
decoder accepts.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any, cast

from testbed.config.sim import SimParams
from testbed.core.errors import MissingDependency, ServerStartError
from testbed.servers.http1 import Connection, Request
from testbed.servers.sim.about import max_model_len
from testbed.servers.sim.dialect import BadRequest, GenerationRequest
from testbed.servers.sim.text import LOGPROBS, Generation, count_tokens
from testbed.wire import h2 as w

if TYPE_CHECKING:
    from testbed.servers.sim.app import SimApp
    from testbed.servers.sim.h2 import Door
    from testbed.servers.sim.h2_call import Call

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

    def _token(self, pb: Any, tid: int, text: str) -> Any:
        token = pb.TokenInfo(text=text)
        if self.options["token_logprobs"]:
            token.logprob = LOGPROBS[tid]
        return token

    def _final(self, pb: Any, gen: Generation, message: Any) -> Any:
        message.stop_reason = pb.StopReason.Value(_STOP[gen.finish_reason])
        if gen.finish_reason == "stop_sequence":
            message.stop_sequence = next((s for s in self.stop if s), "")
        if self.seed is not None:
            message.seed = self.seed
        return message

    def events(self, gen: Generation) -> list[bytes]:
        """Length-prefixed ``GenerationResponse`` messages: the first (with the input token
        count) together with the first token's."""
        from testbed.proto.fmaas import generation_pb2 as pb

        head = pb.GenerationResponse(input_token_count=self.prompt_tokens)
        if self.options["input_text"]:
            head.text = self.prompt
        out = []
        n, tokens = len(gen.ids), self.options["generated_tokens"]
        for i, (tid, text) in enumerate(zip(gen.ids, gen.texts, strict=True), start=1):
            message = pb.GenerationResponse(text=text, generated_token_count=i)
            if tokens:
                message.tokens.append(self._token(pb, tid, text))
            if i == n:
                self._final(pb, gen, message)
            out.append(w.length_prefixed(message.SerializeToString()))
        first = w.length_prefixed(head.SerializeToString())
        if out:
            out[0] = first + out[0]
        return out or [first]

    def whole(self, gen: Generation) -> bytes:
        """The ``GenerationResponse`` of one prompt, serialized."""
        from testbed.proto.fmaas import generation_pb2 as pb

        message = pb.GenerationResponse(
            input_token_count=self.prompt_tokens,
            generated_token_count=len(gen.ids),
            text=(self.prompt if self.options["input_text"] else "") + gen.text,
        )
        if self.options["generated_tokens"]:
            message.tokens.extend(
                self._token(pb, t, x) for t, x in zip(gen.ids, gen.texts, strict=True)
            )
        return bytes(self._final(pb, gen, message).SerializeToString())

    @staticmethod
    def malformed(event: bytes) -> bytes:
        """A message that no protobuf decoder accepts (the malformed-chunk fault)."""
        return w.length_prefixed(MALFORMED)

    @staticmethod
    def error_body(status: int, message: str, param: str | None = None) -> bytes:
        return json.dumps({"status": status, "message": message}).encode()

    def overloaded(self, message: str) -> bytes:
        """TGIS answers a full queue RESOURCE_EXHAUSTED, not a 503's UNAVAILABLE: the gRPC
        code travels in the refusal's body, for the door to end the call with."""
        return json.dumps(
            {"status": 503, "message": message, "code": "RESOURCE_EXHAUSTED"}
        ).encode()


class TgisAnswer:
    """The app's view of one answer on a gRPC call (the HTTP ``Connection``'s answering
    methods): the dialect's messages go out as they come; a refusal becomes the call's
    status. ``settle(answer, status, body)`` takes a non-streamed answer instead (a prompt
    of a batched ``Generate``)."""

    __slots__ = ("call", "on_lost", "settle")

    def __init__(self, call: Call, settle: Any = None) -> None:
        self.call = call
        self.settle = settle
        #: Set by the app: called once if the call ends before its answer does.
        self.on_lost: Any = None

    @property
    def open(self) -> bool:
        return self.call.open

    def respond(self, status: int, body: bytes, content_type: bytes = b"") -> None:
        self.on_lost = None
        if self.settle is not None:
            self.settle(self, status, body)
        elif status == 200:
            self.call.send(w.length_prefixed(body))
            self.call.finish()
        else:
            self.call.finish(*_status(status, body))

    def start_stream(self, content_type: bytes, first: bytes = b"", last: bool = False) -> None:
        self.send(first, last)

    def send(self, data: bytes, last: bool = False) -> None:
        if data:
            self.call.send(data)
        if last:
            self.on_lost = None
            self.call.finish()

    def drop(self) -> None:
        """The disconnect fault: the call ends UNAVAILABLE mid-answer."""
        self.on_lost = None
        self.call.finish("UNAVAILABLE", "the server dropped the call")

    def lost(self) -> None:
        callback, self.on_lost = self.on_lost, None
        if callback is not None:
            callback()


_CODES = {400: "INVALID_ARGUMENT", 422: "INVALID_ARGUMENT", 404: "NOT_FOUND", 503: "UNAVAILABLE"}


def _status(status: int, body: bytes) -> tuple[str, str]:
    """The gRPC status of a refusal the app rendered as ``status`` and a JSON ``body``."""
    try:
        refusal = json.loads(body)
    except ValueError:
        return _CODES.get(status, "INTERNAL"), body.decode("utf-8", "replace")
    # the dialect's own gRPC code when it gave one (an overload), else the status's
    return str(refusal.get("code") or _CODES.get(status, "INTERNAL")), str(refusal.get("message"))


#: What the malformed-chunk fault sends: a message whose text field claims 16 bytes and
#: holds 9, so that no protobuf decoder accepts it.
MALFORMED = b"\x22\x10truncated"


class SimTgis:
    """``fmaas.GenerationService`` on the simulator's app (its loop, its state): each call
    read by :mod:`~testbed.servers.sim.h2` goes to its method here."""

    def __init__(self, app: SimApp) -> None:
        self.app = app
        self._methods = {
            f"/fmaas.GenerationService/{name}": getattr(self, name)
            for name in ("Generate", "GenerateStream", "Tokenize", "ModelInfo")
        }

    def __call__(self, call: Call) -> None:
        from google.protobuf.message import DecodeError

        method = self._methods.get(call.path)
        if self.app.params.log_requests:
            self.app.log_request(call.metadata.get("x-request-id"), "POST", call.path)
        if method is None:
            call.finish("UNIMPLEMENTED", f"Method not found: {call.path}")
            return
        try:
            method(call)
        except DecodeError:
            call.finish("INTERNAL", f"the request is not a valid message for {call.path}")

    def _serve(self, body: bytes, stream: bool, answer: TgisAnswer) -> None:
        request = Request("POST", "grpc", {}, body, True, self.app.loop.time())
        # Duck-typed: the app and its jobs only call the answering methods TgisAnswer has.
        self.app.serve(TgisRequest, stream, request, cast("Connection", answer))

    def GenerateStream(self, call: Call) -> None:
        answer = TgisAnswer(call)  # a request that is not one fails to parse in the app
        call.on_cancel = answer.lost
        self._serve(call.message, True, answer)

    def Generate(self, call: Call) -> None:
        from testbed.proto.fmaas import generation_pb2 as pb

        request = pb.BatchedGenerationRequest.FromString(call.message)
        answers: list[TgisAnswer] = []
        bodies: dict[int, bytes] = {}

        def settle(answer: TgisAnswer, status: int, body: bytes) -> None:
            if not call.open:
                return
            if status != 200:
                for other in answers:
                    if other is not answer:
                        other.lost()  # the others' slots are freed
                call.finish(*_status(status, body))
                return
            bodies[id(answer)] = body
            if len(bodies) == len(request.requests):
                batch = pb.BatchedGenerationResponse(
                    responses=[pb.GenerationResponse.FromString(bodies[id(a)]) for a in answers]
                )
                call.send(w.length_prefixed(batch.SerializeToString()))
                call.finish()

        def cancelled() -> None:
            for answer in answers:
                answer.lost()

        call.on_cancel = cancelled
        for prompt in request.requests:
            answers.append(TgisAnswer(call, settle))
            single = pb.SingleGenerationRequest(
                model_id=request.model_id, request=prompt, params=request.params
            )
            self._serve(single.SerializeToString(), False, answers[-1])
            if not call.open:
                return
        if not answers:
            call.send(w.length_prefixed(b""))
            call.finish()

    def Tokenize(self, call: Call) -> None:
        from testbed.proto.fmaas import generation_pb2 as pb

        request = pb.BatchedTokenizeRequest.FromString(call.message)
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
        call.send(w.length_prefixed(pb.BatchedTokenizeResponse(responses=out).SerializeToString()))
        call.finish()

    def ModelInfo(self, call: Call) -> None:
        from testbed.proto.fmaas import generation_pb2 as pb

        pb.ModelInfoRequest.FromString(call.message)
        info = pb.ModelInfoResponse(
            model_kind=pb.ModelInfoResponse.DECODER_ONLY,
            max_sequence_length=max_model_len(self.app.params),
            max_new_tokens=MAX_NEW_TOKENS,
        )
        call.send(w.length_prefixed(info.SerializeToString()))
        call.finish()


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


async def start_grpc(app: SimApp, host: str, port: int) -> tuple[asyncio.Server, Door]:
    """The simulator's gRPC server on ``host:port`` (0: a free port), in the running loop;
    the server and its door (its live connections)."""
    try:
        from testbed.servers.sim import h2

        return await h2.serve(SimTgis(app), host, port)
    except ImportError as exc:
        raise MissingDependency("hpack", "tgis") from exc
    except OSError as exc:
        raise ServerStartError(
            f"the simulator cannot listen for gRPC on {host}:{port}: {exc.strerror};"
            " choose another --grpc-port"
        ) from exc
