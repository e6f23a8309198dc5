"""The TGI protocol: ``POST /generate`` and ``POST /generate_stream``.

A TGI request is ``{"inputs": prompt, "parameters": {...}}``. Each stream event carries one
token (``token.text``; special tokens are not content); the last one carries
``generated_text`` and ``details`` (finish reason, generated token count): a stream without
that final event was cut short (:data:`ENDING`). The server's
counts are exposed in OpenAI shape (``completion_tokens``, and ``prompt_tokens`` when the
details include the prefill) so downstream code reads one ``usage`` format.
"""

from __future__ import annotations

import json
from typing import Any

from testbed.clients.http import ConnectionPool
from testbed.clients.response import STREAM_SINK, BodySinkJson, Ending, Response, Sink

PATHS = {True: "/generate_stream", False: "/generate"}
#: A stream ends with the event carrying ``generated_text`` (and ``details`` when asked,
#: which always hold the finish reason: :func:`decode_event` checks that).
ENDING = Ending("the final event (generated_text, details)", finish_reason=False)


def decode_event(response: Response, obj: Any, t_ns: int) -> None:
    """Read one ``generate_stream`` event or one ``generate`` body into ``response``."""
    if isinstance(obj, list):  # /generate may answer a list of one
        obj = obj[0] if obj else {}
    if not isinstance(obj, dict):
        return
    token = obj.get("token")
    if token is not None:
        if not token.get("special") and token.get("text"):
            response.chunks.append((t_ns, token["text"]))
    elif obj.get("generated_text"):  # a whole (non-streamed) body
        response.chunks.append((t_ns, obj["generated_text"]))
    details = obj.get("details")
    if obj.get("generated_text") is not None or details is not None:
        response.ended = True
    if details:
        response.finish_reason = details.get("finish_reason")
        if not response.finish_reason:
            response.error = f"details without a finish_reason: {str(details)[:200]}"
        usage: dict[str, Any] = {}
        if details.get("generated_tokens") is not None:
            usage["completion_tokens"] = details["generated_tokens"]
        if details.get("prefill"):
            usage["prompt_tokens"] = len(details["prefill"])
        response.usage = usage or None
    error = obj.get("error")
    if error:
        response.error = str(error)


def body_for(request: dict[str, Any], *, stream: bool) -> dict[str, Any]:
    """``request`` with ``details`` asked for, so the finish reason and counts come back."""
    body = dict(request)
    parameters = dict(body.get("parameters") or {})
    parameters.setdefault("details", True)
    body["parameters"] = parameters
    body["stream"] = stream
    return body


def encode(pool: ConnectionPool, request: dict[str, Any], *, stream: bool) -> bytes:
    """The wire bytes of one request."""
    body = json.dumps(body_for(request, stream=stream), separators=(",", ":"))
    return pool.encode("POST", PATHS[stream], body.encode())


def sink(*, stream: bool, keep_raw: bool = False) -> Sink:
    """A fresh sink that decodes a TGI response (streamed or not)."""
    if stream:
        return STREAM_SINK(decode_event, keep_raw=keep_raw, ending=ENDING)
    return BodySinkJson(decode_event, keep_raw=keep_raw, ending=ENDING)


async def generate(
    pool: ConnectionPool,
    request: dict[str, Any],
    *,
    stream: bool = True,
    keep_raw: bool = False,
    timeout_s: float | None = None,
) -> Response:
    """Send one TGI request and return what came back (see :func:`openai.complete`)."""
    target = sink(stream=stream, keep_raw=keep_raw)
    response = target.response
    await pool.send(encode(pool, request, stream=stream), target, timeout_s)
    return response
