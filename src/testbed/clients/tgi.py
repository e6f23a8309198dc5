"""The TGI protocol: ``POST /generate`` and ``POST /generate_stream``.

A TGI request is ``{"inputs": prompt, "parameters": {...}}``. Each stream event carries one
token (``token.text``; special tokens are not content); the last one carries
``generated_text`` and ``details`` (finish reason, generated token count): a stream without
that final event was cut short (:data:`ENDING`), and an event after it is the server's error.
The server's counts are exposed in OpenAI shape (``completion_tokens``, and ``prompt_tokens``
when the details include the prefill) so downstream code reads one ``usage`` format, and are
checked as OpenAI's are (:mod:`~testbed.clients.counts`). An error event
(``{"error": …, "error_type": …}``) is the response's error, even with an empty message.
"""

from __future__ import annotations

import json
from typing import Any

from testbed.clients.counts import NO_LIMITS, Limits, whole_number
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
    text = obj.get("generated_text") if token is None else None  # a whole (unary) body's
    if token is not None and not token.get("special"):
        text = token.get("text")
    if text:
        if isinstance(text, str):
            response.chunks.append((t_ns, text))
        else:
            response.error = f"generated text {json.dumps(text)[:80]} is not a string"
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
    if error is not None:
        response.error = error_text(error, obj.get("error_type"))


def error_text(error: Any, kind: Any) -> str:
    """TGI's error event in words (an empty message would read as nothing at all)."""
    message = str(error).strip()
    said = f" (error_type {kind})" if kind else ""
    return message + said if message else f"an error without a message{said}"


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


def limits_of(request: dict[str, Any]) -> Limits:
    """What ``request`` allows the answer: ``parameters.max_new_tokens`` (``details`` count
    the one sequence returned, whatever ``best_of`` was)."""
    parameters = request.get("parameters")
    most = parameters.get("max_new_tokens") if isinstance(parameters, dict) else None
    return Limits(whole_number(most))


def sink(*, stream: bool, keep_raw: bool = False, limits: Limits = NO_LIMITS) -> Sink:
    """A fresh sink that decodes a TGI response (streamed or not), its counts checked
    against ``limits`` (:func:`limits_of`)."""
    if stream:
        return STREAM_SINK(decode_event, keep_raw=keep_raw, ending=ENDING, limits=limits)
    return BodySinkJson(decode_event, keep_raw=keep_raw, ending=ENDING, limits=limits)


async def generate(
    pool: ConnectionPool,
    request: dict[str, Any],
    *,
    stream: bool = True,
    keep_raw: bool = False,
    timeout_s: float | None = None,
) -> Response:
    """Send one TGI request and return what came back (see :func:`openai.complete`)."""
    target = sink(stream=stream, keep_raw=keep_raw, limits=limits_of(request))
    response = target.response
    await pool.send(encode(pool, request, stream=stream), target, timeout_s)
    return response
