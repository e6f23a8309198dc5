"""One object per API, written once and used by every probe: the body of a request, the
extra fields merged into it, its wire bytes, and the sink that reads (and judges) the answer.

:data:`APIS` holds them by the name a probe's ``api`` setting gives: ``completions``,
``chat``, ``responses``, ``embeddings`` (OpenAI's shapes, :mod:`.openai`, :mod:`.responses`,
:mod:`.embeddings`), ``tgi`` (:mod:`.tgi`) and ``tgis`` (:mod:`.tgis`, over gRPC). A probe
says what it asks in no protocol's words — a :class:`Request` — and the API says it in its
own (:meth:`Api.body`); the probe never branches on the API's name. What differs between
the APIs beyond the body is a fact of the object: the endpoint protocol that serves it
(:attr:`Api.protocol`), whether it goes over gRPC, streams, names a model, lists models at
``GET /v1/models``, can ask for exact output lengths, or answers with vectors.

A request's fields go where the API keeps them: OpenAI's at the top of the body; TGI's in
``parameters``; TGIS's in ``params`` (``stopping``, ``sampling``, ``response``). A field a
request leaves unset (None) is not sent, so the server's default holds. A temperature given
is stated where greedy is not the default: OpenAI's ``temperature: 0`` (its default is 1);
TGI and TGIS decode greedily unless told to sample (``do_sample``, ``method: SAMPLE``), so
they are told only of a temperature above 0 (TGI refuses 0).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from testbed.clients import embeddings, openai, responses, tgi, tgis
from testbed.clients.counts import Limits
from testbed.clients.embeddings import EmbeddingsSink, Expect
from testbed.clients.endpoint import Protocol
from testbed.clients.http import ConnectionPool
from testbed.clients.response import Response, Sink
from testbed.clients.tgis import TgisPool, TgisSink

AnySink = Sink | TgisSink | EmbeddingsSink
AnyLimits = Limits | Expect


@dataclass(frozen=True, slots=True)
class Request:
    """One request in no protocol's words (OpenAI's names); None leaves a field unsent.

    ``messages`` are a chat's (None: the prompt as the user's one message); ``inputs`` an
    embeddings batch (None: the prompt alone). ``ignore_eos`` asks for ``max_tokens``
    exactly (TGIS's way: ``min_new_tokens``). ``logprobs``: the alternatives per token to
    return (0: the chosen token's only). ``extra``: fields sent as given, in OpenAI's or TGI's
    flat names (TGIS places TGI's names where it keeps them).
    """

    prompt: str = ""
    messages: Sequence[Mapping[str, Any]] | None = None
    inputs: Sequence[str] | None = None
    model: str = ""
    max_tokens: int | None = None
    temperature: float | None = None
    ignore_eos: bool | None = None
    seed: int | None = None
    top_p: float | None = None
    top_k: int | None = None
    stop: Sequence[str] | None = None
    logprobs: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def sampling(self) -> dict[str, Any]:
        """The sampling fields given (seed, top_p, top_k), in OpenAI's names."""
        given = {"seed": self.seed, "top_p": self.top_p, "top_k": self.top_k}
        return {name: value for name, value in given.items() if value is not None}


class Api:
    """An API's body, merge, encoding and sink; subclasses say what differs."""

    name: str
    protocol: Protocol = "openai"  # the endpoint protocol that serves it
    grpc = False  # sent over the gRPC channel (else the HTTP pool)
    streams = True  # the answer may be streamed (embeddings: one body, always)
    names_model = True  # the body names the model (TGI serves one and names none)
    lists_models = True  # GET /v1/models lists what it serves (model discovery)
    #: the API has its own way to ask for exactly ``max_tokens`` (a load's ``ignore_eos``)
    exact_lengths = True
    chat = False  # the prompt is a conversation of messages (its history grows by them)
    #: the server's prompt count may exceed the client's: a chat template, or an embedding
    #: model's special tokens per input
    adds_to_prompt = False
    embeds = False  # answers with vectors, not text

    def body(self, request: Request) -> dict[str, Any]:
        """The body of ``request`` (stream flags are the encoding's)."""
        raise NotImplementedError

    def merge(self, body: dict[str, Any], *extras: Mapping[str, Any]) -> dict[str, Any]:
        """``body`` with each of ``extras`` (a probe's ``extra_body``, in the API's own
        structure) merged in, later ones winning; at the top of the body here."""
        extras = tuple(e for e in extras if e)
        if not extras:
            return body
        out = dict(body)
        for extra in extras:
            out.update(extra)
        return out

    def encode(self, pool: ConnectionPool | None, body: dict[str, Any], *, stream: bool) -> bytes:
        """The wire bytes of ``body`` (built once, sent many times in a load test); ``pool``
        writes an HTTP request's head (None only for the gRPC API)."""
        raise NotImplementedError

    def limits_of(self, body: dict[str, Any]) -> AnyLimits:
        """What ``body`` allows its answer (the sink checks the server's claims by it)."""
        raise NotImplementedError

    def sink(self, *, stream: bool, limits: Any, keep_raw: bool = False) -> AnySink:
        """A fresh sink that decodes and checks one answer, its claims held to ``limits``
        (what :meth:`limits_of` the request's body says)."""
        raise NotImplementedError

    async def send(
        self,
        pool: ConnectionPool | TgisPool,
        body: dict[str, Any],
        *,
        stream: bool = True,
        keep_raw: bool = False,
        timeout_s: float | None = None,
    ) -> Response:
        """Send ``body`` once through ``pool`` (the gRPC channel for ``tgis``) and return what
        came back; the client's exception when no answer came."""
        target = self.sink(stream=stream, keep_raw=keep_raw, limits=self.limits_of(body))
        http = pool if isinstance(pool, ConnectionPool) else None
        sink: Any = target  # each pool takes its own protocol's sinks, which this API makes
        await pool.send(self.encode(http, body, stream=stream), sink, timeout_s)
        return target.response


def _http(pool: ConnectionPool | None) -> ConnectionPool:
    if pool is None:
        raise TypeError("an HTTP API's request is encoded by its HTTP pool")
    return pool


class Completions(Api):
    """OpenAI's ``/v1/completions``: a prompt."""

    name = "completions"
    route: openai.Api = "completions"

    def body(self, request: Request) -> dict[str, Any]:
        body: dict[str, Any] = {"model": request.model} if request.model else {}
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        if request.temperature is not None:
            body["temperature"] = request.temperature
        self._prompt(body, request)
        body.update(request.sampling())
        if request.stop is not None:
            body["stop"] = list(request.stop)
        if request.ignore_eos is not None:
            body["ignore_eos"] = request.ignore_eos
        body.update(request.extra)
        return body

    def _prompt(self, body: dict[str, Any], request: Request) -> None:
        body["prompt"] = request.prompt
        if request.logprobs is not None:
            body["logprobs"] = request.logprobs

    def encode(self, pool: ConnectionPool | None, body: dict[str, Any], *, stream: bool) -> bytes:
        return openai.encode(_http(pool), self.route, body, stream=stream)

    def limits_of(self, body: dict[str, Any]) -> Limits:
        return openai.limits_of(body)

    def sink(self, *, stream: bool, limits: Any, keep_raw: bool = False) -> Sink:
        return openai.sink(stream=stream, keep_raw=keep_raw, limits=limits)


class Chat(Completions):
    """OpenAI's ``/v1/chat/completions``: a conversation of messages."""

    name = "chat"
    route: openai.Api = "chat"
    chat = True
    adds_to_prompt = True

    def _prompt(self, body: dict[str, Any], request: Request) -> None:
        given = request.messages
        messages = [{"role": "user", "content": request.prompt}] if given is None else given
        body["messages"] = [dict(m) for m in messages]
        if request.logprobs is not None:
            body["logprobs"] = True
            body["top_logprobs"] = request.logprobs


class Responses(Api):
    """OpenAI's Responses API (``/v1/responses``, :mod:`.responses`): a prompt as ``input``,
    ``store: false`` (a load test's answers are not to be kept)."""

    name = "responses"
    adds_to_prompt = True

    def body(self, request: Request) -> dict[str, Any]:
        body = responses.request_body(request.prompt, request.model, request.max_tokens)
        if request.ignore_eos is not None:
            body["ignore_eos"] = request.ignore_eos
        body.update(request.extra)
        return body

    def encode(self, pool: ConnectionPool | None, body: dict[str, Any], *, stream: bool) -> bytes:
        return responses.encode(_http(pool), body, stream=stream)

    def limits_of(self, body: dict[str, Any]) -> Limits:
        return responses.limits_of(body)

    def sink(self, *, stream: bool, limits: Any, keep_raw: bool = False) -> Sink:
        return responses.sink(stream=stream, keep_raw=keep_raw, limits=limits)


class Embeddings(Api):
    """OpenAI's ``/v1/embeddings`` (:mod:`.embeddings`): a batch of inputs, one body back."""

    name = "embeddings"
    streams = False
    exact_lengths = False
    adds_to_prompt = True
    embeds = True

    def body(self, request: Request) -> dict[str, Any]:
        inputs = list(request.inputs or (request.prompt,))
        return {**embeddings.request_body(inputs, request.model), **request.extra}

    def encode(self, pool: ConnectionPool | None, body: dict[str, Any], *, stream: bool) -> bytes:
        return embeddings.encode(_http(pool), body)  # one body, whatever ``stream`` says

    def limits_of(self, body: dict[str, Any]) -> Expect:
        return embeddings.expect_of(body)

    def sink(self, *, stream: bool, limits: Any, keep_raw: bool = False) -> EmbeddingsSink:
        """The vectors are kept when ``keep_raw`` (a load keeps none)."""
        return EmbeddingsSink(limits, keep_vectors=keep_raw)


class Tgi(Api):
    """TGI's ``/generate`` and ``/generate_stream`` (:mod:`.tgi`); ``details`` are asked on
    the wire, after every other parameter."""

    name = "tgi"
    protocol: Protocol = "tgi"
    names_model = False
    lists_models = False
    #: TGI has no ignore_eos (the simulator's parameter of that name is its own extension):
    #: a load does not ask for it; a correctness case that states it sends it
    exact_lengths = False

    def body(self, request: Request) -> dict[str, Any]:
        parameters: dict[str, Any] = {}
        if request.max_tokens is not None:
            parameters["max_new_tokens"] = request.max_tokens
        if request.temperature:  # TGI refuses temperature 0: greedy is its default
            parameters.update(do_sample=True, temperature=request.temperature)
        parameters.update(request.sampling())
        if request.ignore_eos is not None:
            parameters["ignore_eos"] = request.ignore_eos
        if request.stop:
            parameters["stop"] = list(request.stop)
        if request.logprobs:
            parameters["top_n_tokens"] = request.logprobs
        parameters.update(request.extra)
        return {"inputs": request.prompt, "parameters": parameters}

    def merge(self, body: dict[str, Any], *extras: Mapping[str, Any]) -> dict[str, Any]:
        """Extras go into ``parameters``."""
        extras = tuple(e for e in extras if e)
        if not extras:
            return body
        merged = {key: value for extra in extras for key, value in extra.items()}
        return {**body, "parameters": {**body.get("parameters", {}), **merged}}

    def encode(self, pool: ConnectionPool | None, body: dict[str, Any], *, stream: bool) -> bytes:
        return tgi.encode(_http(pool), body, stream=stream)

    def limits_of(self, body: dict[str, Any]) -> Limits:
        return tgi.limits_of(body)

    def sink(self, *, stream: bool, limits: Any, keep_raw: bool = False) -> Sink:
        return tgi.sink(stream=stream, keep_raw=keep_raw, limits=limits)


#: TGI parameter names in a request's ``extra`` and where TGIS keeps them, so that an extra
#: field (a bad temperature, say) means the same on both; other keys are ``Parameters`` fields.
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


class Tgis(Api):
    """TGIS's ``fmaas.GenerationService`` over gRPC (:mod:`.tgis`), written in the proto's
    field names. ``ignore_eos`` is ``min_new_tokens`` = ``max_new_tokens``; sampling fields
    go only with a temperature above 0 (greedy decoding reads none)."""

    name = "tgis"
    protocol: Protocol = "tgis"
    grpc = True
    lists_models = False  # TGIS ignores the model id: nothing to discover

    def body(self, request: Request) -> dict[str, Any]:
        params: dict[str, Any] = {}
        stopping: dict[str, Any] = {}
        if request.max_tokens is not None:
            stopping["max_new_tokens"] = request.max_tokens
            if request.ignore_eos:
                stopping["min_new_tokens"] = request.max_tokens
        if request.stop:
            stopping["stop_sequences"] = list(request.stop)
        if stopping:
            params["stopping"] = stopping
        if request.temperature:  # greedy is TGIS's default method
            params["method"] = "SAMPLE"
            params["sampling"] = {"temperature": request.temperature, **request.sampling()}
        if request.logprobs is not None:
            params["response"] = {
                "generated_tokens": True,
                "token_logprobs": True,
                "top_n_tokens": request.logprobs,
            }
        for key, value in request.extra.items():
            place = _TGIS_PLACES.get(key)
            if place is None:
                params[key] = value
                continue
            params.setdefault(place, {})[key] = value
            if place == "sampling":
                params["method"] = "SAMPLE"
        return {"model_id": request.model, "requests": [{"text": request.prompt}], "params": params}

    def merge(self, body: dict[str, Any], *extras: Mapping[str, Any]) -> dict[str, Any]:
        """Extras go into ``params``, one level deep: ``{sampling: {temperature: 0.7}}``
        keeps the stopping criteria the body set."""
        extras = tuple(e for e in extras if e)
        if not extras:
            return body
        params = dict(body.get("params", {}))
        for extra in extras:
            for key, value in extra.items():
                inner = params.get(key)
                both = isinstance(inner, dict) and isinstance(value, dict)
                params[key] = {**inner, **value} if both else value  # type: ignore[dict-item]
        return {**body, "params": params}

    def encode(self, pool: ConnectionPool | None, body: dict[str, Any], *, stream: bool) -> bytes:
        del pool  # protobuf bytes; the channel adds the gRPC framing
        return tgis.encode(body, stream=stream)

    def limits_of(self, body: dict[str, Any]) -> Limits:
        return tgis.limits_of(body)

    def sink(self, *, stream: bool, limits: Any, keep_raw: bool = False) -> TgisSink:
        return tgis.sink(stream=stream, keep_raw=keep_raw, limits=limits)


#: Every API by its name (a probe's ``api`` setting).
APIS: Mapping[str, Api] = {
    api.name: api for api in (Completions(), Chat(), Responses(), Embeddings(), Tgi(), Tgis())
}


def of_protocol(protocol: Protocol, *, chat: bool) -> Api:
    """The API a request goes to over an endpoint ``protocol``: OpenAI's is chat or
    completions by the request's shape; TGI and TGIS are one API each."""
    if protocol == "openai":
        return APIS["chat" if chat else "completions"]
    return APIS[protocol]
