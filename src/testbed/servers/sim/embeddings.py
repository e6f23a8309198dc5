"""``POST /v1/embeddings`` for the simulator: vectors with a known latency, shaped like vLLM's.

``input`` is a text, a list of texts, a list of token ids or a list of lists of them (vLLM's
four forms); ``dimensions`` shortens the vector (at most ``embedding_dimensions``, the
"model's" own); ``encoding_format`` is ``float`` or ``base64`` (little-endian float32).

The answer comes ``embedding_ms`` + ``embedding_per_token_ms`` × the request's input tokens
after the request arrived (the ground truth a load test measures; no queue, no generation
slot: an embeddings request never waits for one). Each input's vector is a unit vector drawn
from a generator seeded by the simulator's seed and the input, so the same input always has
the same vector (a golden one can be recorded) and different inputs are nearly orthogonal. A
shortened vector is the full one's start, renormalised (as a Matryoshka model's is).
Usage: ``prompt_tokens`` = ``total_tokens`` = the inputs' tokens, ``completion_tokens`` 0.
"""

from __future__ import annotations

import base64
import zlib
from typing import Any, Protocol

import numpy as np
import orjson

from testbed.config.sim import SimParams
from testbed.core.clock import wall_seconds
from testbed.servers.http1 import Connection, Request
from testbed.servers.sim.dialect import BadRequest, GenerationRequest, load_json, opt_int
from testbed.servers.sim.metrics import SimMetrics
from testbed.servers.sim.pacing import Pacer
from testbed.servers.sim.text import count_tokens


class Server(Protocol):
    """What an embeddings answer needs of the server (``app.SimApp`` is one): stated here,
    so that this module does not import the app that routes to it."""

    params: SimParams
    metrics: SimMetrics
    pacer: Pacer

    @property
    def ready(self) -> bool: ...


def inputs_of(given: Any, params: SimParams) -> list[tuple[str, int]]:
    """Each input as (the text its vector is keyed on, its tokens)."""
    if isinstance(given, str):
        given = [given]
    elif isinstance(given, list) and given and all(type(t) is int for t in given):
        given = [given]  # one input of token ids
    if not isinstance(given, list) or not given:
        raise BadRequest("'input' must be a string or a non-empty list of inputs", "input")
    out = []
    for one in given:
        if isinstance(one, str):
            out.append((one, count_tokens(one, params.tokenizer)))
        elif isinstance(one, list) and one and all(type(t) is int for t in one):
            out.append((" ".join(map(str, one)), len(one)))
        else:
            raise BadRequest(
                "each input must be a string or a non-empty list of token ids", "input"
            )
    return out


def vector(text: str, dimensions: int, params: SimParams) -> np.ndarray[Any, Any]:
    """The unit vector of ``text``, ``dimensions`` long (see the module's docstring)."""
    rng = np.random.default_rng([params.seed, zlib.crc32(text.encode())])
    full = rng.standard_normal(params.embedding_dimensions)
    part = full[:dimensions]
    norm = float(np.linalg.norm(part)) or 1.0
    return (part / norm).astype(np.float32)


def answer(
    inputs: list[tuple[str, int]], dimensions: int, encoding: str, params: SimParams
) -> bytes:
    """The answer's body."""
    data = []
    for index, (text, _) in enumerate(inputs):
        vec = vector(text, dimensions, params)
        value: Any = (
            vec if encoding == "float" else base64.b64encode(vec.astype("<f4").tobytes()).decode()
        )
        data.append({"index": index, "object": "embedding", "embedding": value})
    tokens = sum(n for _, n in inputs)
    body = {
        "id": f"embd-{zlib.crc32(repr(inputs).encode()):x}",
        "object": "list",
        "created": wall_seconds(),
        "model": params.model_name,
        "data": data,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens, "completion_tokens": 0},
    }
    return orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY)


def _parse(body: bytes, params: SimParams) -> tuple[list[tuple[str, int]], int, str, Any]:
    data = load_json(body)
    inputs = inputs_of(data.get("input"), params)
    native = params.embedding_dimensions
    dimensions = opt_int(data, "dimensions", 1)
    if dimensions is not None and dimensions > native:
        raise BadRequest(f"dimensions {dimensions} is more than the model's {native}", "dimensions")
    encoding = data.get("encoding_format", "float")
    if encoding not in ("float", "base64"):
        raise BadRequest("'encoding_format' must be float or base64", "encoding_format")
    limit = params.max_model_len
    for _, tokens in inputs:
        if limit is not None and tokens > limit:
            raise BadRequest(
                f"This model's maximum context length is {limit} tokens. However, you"
                f" requested {tokens} tokens in the input for embedding generation.",
                "input",
            )
    return inputs, dimensions or native, encoding, data.get("model")


def serve(app: Server, request: Request, conn: Connection) -> None:
    """Answer one embeddings request after its latency (its client may leave meanwhile)."""
    params = app.params
    try:
        inputs, dimensions, encoding, model = _parse(request.body, params)
        if not app.ready:
            raise BadRequest("the server is starting (slow_start_s)", status=503)
        if model and model != params.model_name and model not in params.models:
            raise BadRequest(f"The model `{model}` does not exist.", "model", status=404)
    except BadRequest as exc:
        conn.respond(exc.status, GenerationRequest.error_body(exc.status, exc.message, exc.param))
        return
    tokens = sum(n for _, n in inputs)
    app.metrics.prompt_tokens += tokens
    app.metrics.request_prompt_tokens.observe(tokens)
    body = answer(inputs, dimensions, encoding, params)
    delay = (params.embedding_ms + params.embedding_per_token_ms * tokens) / 1e3
    if delay <= 0:
        conn.respond(200, body)
        return

    def send() -> None:
        conn.on_lost = None
        if conn.open:
            conn.respond(200, body)

    entry = app.pacer.at(request.arrival + delay, send)
    conn.on_lost = lambda: app.pacer.cancel(entry)
