"""OpenAI's ``/v1/embeddings``: a batch of inputs in, one vector per input out — checked.

A request carries ``input`` (one text, or a batch of N texts), the ``model``, optionally
``dimensions`` (a shorter vector, for models trained to allow it) and ``encoding_format``
(``float``: JSON numbers; ``base64``: each vector's little-endian float32 bytes, as vLLM and
OpenAI encode them). The answer is one body (never streamed)::

    {"object": "list", "data": [{"index": 0, "object": "embedding", "embedding": [...]}, ...],
     "model": "...", "usage": {"prompt_tokens": 12, "total_tokens": 12}}

A server's answer is checked, not trusted. What no correct server sends is the response's
error, in words: ``data`` that is not a list of embeddings; more or fewer embeddings than
inputs; an index that is not a whole number, repeated or out of range; a vector that is not
a list of numbers (or base64 that is not whole float32s); vectors of different lengths, or
of another length than the ``dimensions`` asked; ``usage`` counts that are not whole numbers
≥ 0, or a ``total_tokens`` other than ``prompt_tokens`` (+ ``completion_tokens`` when given:
vLLM sends 0). An error object (``{"error": {...}}``, or vLLM's older top-level shape) is
the server's refusal, in its own words.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from testbed.clients.counts import whole_number
from testbed.clients.http import ConnectionPool
from testbed.clients.openai import error_text
from testbed.clients.response import BodySinkJson, Response

PATH = "/v1/embeddings"

EncodingFormat = Literal["float", "base64"]


@dataclass(frozen=True, slots=True)
class Expect:
    """What a request's answer must hold: one vector per input, each ``dimensions`` long
    when the request asked for a length (None: any length, the same for every vector)."""

    inputs: int
    dimensions: int | None = None


def request_body(
    inputs: list[str],
    model: str,
    *,
    dimensions: int | None = None,
    encoding_format: EncodingFormat = "float",
) -> dict[str, Any]:
    """The body of one request for the batch ``inputs`` (a batch of one is sent as a list
    too: the answer's shape is the same)."""
    body: dict[str, Any] = {"model": model, "input": list(inputs)}
    if encoding_format != "float":
        body["encoding_format"] = encoding_format
    if dimensions is not None:
        body["dimensions"] = dimensions
    return body


def expect_of(body: dict[str, Any]) -> Expect:
    """What ``body`` asks of the answer (its inputs, its ``dimensions``)."""
    given = body.get("input")
    if isinstance(given, str) or (isinstance(given, list) and given and type(given[0]) is int):
        count = 1  # one text, or one list of token ids
    else:
        count = len(given) if isinstance(given, list) else 1
    return Expect(count, whole_number(body.get("dimensions")))


def encode(pool: ConnectionPool, body: dict[str, Any]) -> bytes:
    """The wire bytes of one request (built once, sent many times in a load test)."""
    return pool.encode("POST", PATH, json.dumps(body, separators=(",", ":")).encode())


@dataclass(slots=True)
class Embeddings:
    """What an answer held: its vectors in input order (only when kept), their length."""

    dimensions: int | None = None
    vectors: list[list[float]] = field(default_factory=list)


class Decoder:
    """Reads one embeddings body into a :class:`~testbed.clients.response.Response`
    (``usage``, ``error``) and an :class:`Embeddings` (the vectors, when ``keep``)."""

    __slots__ = ("expect", "keep", "out")

    def __init__(self, expect: Expect, *, keep: bool = False) -> None:
        self.expect, self.keep, self.out = expect, keep, Embeddings()

    def __call__(self, response: Response, obj: Any, t_ns: int) -> None:
        if not isinstance(obj, dict):
            response.error = f"not an embeddings answer (JSON {type(obj).__name__})"
            return
        if "error" in obj or obj.get("object") == "error":
            response.error = error_text(obj.get("error") or obj)
            return
        problem = self._read_data(obj.get("data")) or _usage_problem(obj.get("usage"))
        if problem is not None:
            response.error = problem
            return
        response.usage = obj.get("usage")

    def _read_data(self, data: Any) -> str | None:
        """Why ``data`` is not the vectors the request asked for (None when it is)."""
        if not isinstance(data, list):
            return f"data is not a list of embeddings: {json.dumps(data)[:120]}"
        want = self.expect.inputs
        if len(data) != want:
            return f"{len(data)} embeddings in the answer to a request with {want} inputs"
        slots: list[list[float] | None] = [None] * want
        lengths = set()
        for position, item in enumerate(data):
            given = item.get("index") if isinstance(item, dict) else None
            index = whole_number(given)
            if index is None or not 0 <= index < want or slots[index] is not None:
                shown = json.dumps(given)[:40]
                return f"data[{position}].index {shown} is not one of 0..{want - 1} used once"
            vector = _vector(item.get("embedding"))
            if isinstance(vector, str):
                return f"data[{position}].embedding {vector}"
            slots[index] = vector
            lengths.add(len(vector))
        if len(lengths) > 1:
            return f"embeddings of different lengths in one answer: {sorted(lengths)}"
        dims = lengths.pop() if lengths else None
        asked = self.expect.dimensions
        if asked is not None and dims != asked:
            return f"embeddings of {dims} dimensions, but the request asked for {asked}"
        self.out.dimensions = dims
        if self.keep:
            self.out.vectors = [v for v in slots if v is not None]
        return None


def _vector(value: Any) -> list[float] | str:
    """The vector ``value`` holds, or why it holds none (the words follow its field)."""
    if isinstance(value, str):  # encoding_format base64: little-endian float32s
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            return "is neither a list of numbers nor base64"
        if not raw or len(raw) % 4:
            return f"is {len(raw)} bytes of base64, not whole float32s"
        import numpy as np  # here: only a base64 answer needs it

        return [float(x) for x in np.frombuffer(raw, dtype="<f4")]
    if not isinstance(value, list) or not value:
        return f"is not a list of numbers: {json.dumps(value)[:80]}"
    # JSON has no NaN or infinity; a bool or a string among the numbers is the server's error
    if not set(map(type, value)) <= {float, int}:
        bad = next(v for v in value if type(v) not in (float, int))
        return f"holds {json.dumps(bad)[:40]}, not a number"
    return value


def _usage_problem(usage: Any) -> str | None:
    """Why ``usage`` cannot be an embeddings request's counts (None when it can, or is
    absent): whole numbers ≥ 0, and nothing generated beyond the prompt."""
    if usage is None:
        return None
    if not isinstance(usage, dict):
        return f"usage is not an object of counts: {str(usage)[:200]}"
    counts = {k: usage.get(k) for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
    for name, value in counts.items():
        if value is not None and (whole_number(value) is None or value < 0):
            shown = json.dumps(value)[:40]
            return f"usage.{name} {shown} is not a count of tokens (a whole number ≥ 0)"
    prompt, out, total = counts.values()
    if prompt is not None and total is not None and total != prompt + (out or 0):
        plus = f" + completion_tokens {out}" if out else ""
        return f"usage.total_tokens {total} is not prompt_tokens {prompt}{plus}"
    return None


class EmbeddingsSink(BodySinkJson):
    """The sink of one embeddings request: the whole body, decoded and checked at its end;
    ``embeddings`` holds what it carried."""

    __slots__ = ("embeddings",)

    def __init__(self, expect: Expect, *, keep_vectors: bool = False) -> None:
        decoder = Decoder(expect, keep=keep_vectors)
        super().__init__(decoder, keep_raw=False)
        self.embeddings = decoder.out


async def embed(
    pool: ConnectionPool,
    body: dict[str, Any],
    *,
    timeout_s: float | None = None,
) -> tuple[Response, Embeddings]:
    """Send one request, return what came back and the vectors it held (in input order).

    Connection failures raise :class:`~testbed.clients.http.HttpClientError`; an HTTP error
    status and an answer that is not the vectors asked for are ``Response.error``.
    """
    target = EmbeddingsSink(expect_of(body), keep_vectors=True)
    await pool.send(encode(pool, body), target, timeout_s)
    return target.response, target.embeddings
