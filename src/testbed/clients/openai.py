"""The OpenAI-compatible protocol: ``/v1/completions`` and ``/v1/chat/completions``.

Requests are plain dicts (the OpenAI body); :func:`complete` sends one and returns a
:class:`~testbed.clients.response.Response`. Streamed requests ask for
``stream_options.include_usage`` so the server's token counts arrive in the last chunk.
:func:`list_models`, :func:`discover_model` and :func:`find_model` read ``GET /v1/models``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Literal

from testbed.clients.counts import NO_LIMITS, Limits, whole_number
from testbed.clients.http import (
    ConnectionPool,
    ReadTimeout,
    ServerStatusError,
)
from testbed.clients.readpath import compiled
from testbed.clients.response import STREAM_SINK, BodySinkJson, Decoder, Ending, Response, Sink
from testbed.core.errors import InputError

Api = Literal["completions", "chat"]

#: A complete answer: a stream ends with ``data: [DONE]``; either form names a finish reason.
ENDING = Ending("data: [DONE]")

PATHS: dict[str, str] = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}


def decode_chunk(response: Response, obj: Any, t_ns: int) -> None:
    """Read one completions or chat object (a stream chunk or a whole body) into
    ``response``: content text, finish reason, usage, error.

    What no correct server sends is the response's error, in words: an event that is not a
    JSON object; an error object (under ``error``, or at the top level as vLLM's streams
    sent it before 0.10: ``{"object": "error", "message": …}``); content after the chunk
    that carried the finish reason; text, a finish reason or usage of the wrong type; a
    choice index that is not a whole number. Only choice 0 is read (the others of an
    ``n`` > 1 request are left; the highest index is kept for the end's check).
    """
    if not isinstance(obj, dict):
        response.error = f"not a completion chunk (JSON {type(obj).__name__}): {str(obj)[:200]}"
        return
    choices = obj.get("choices")
    if "choices" not in obj and (obj.get("object") == "error" or "message" in obj):
        response.error = error_text(obj)
        return
    if choices:
        _read_choice(response, choices[0], t_ns)
    usage = obj.get("usage")
    if usage:
        if isinstance(usage, dict):
            response.usage = usage
        else:
            response.error = f"usage is not an object of counts: {str(usage)[:200]}"
    error = obj.get("error")
    if error:
        response.error = error_text(error)


def _read_choice(response: Response, choice: Any, t_ns: int) -> None:
    index = choice.get("index")  # absent or null: the one choice
    if index is not None and (index != 0 or type(index) is not int):
        if type(index) is int and index > 0:
            response.top_index = max(response.top_index, index)
        else:
            response.error = f"choice index {json.dumps(index)[:40]} is not a whole number ≥ 0"
        return
    text = choice.get("text")
    if text is None:
        message = choice.get("delta") or choice.get("message")
        if message:
            text = message.get("content")
    if text:
        if not isinstance(text, str):
            response.error = f"content {json.dumps(text)[:80]} is not a string"
            return
        if response.finish_reason is not None:
            response.error = (
                f"content after the chunk with finish_reason {response.finish_reason!r}:"
                f" {text[:80]!r}"
            )
        response.chunks.append((t_ns, text))
    reason = choice.get("finish_reason")
    if reason:
        if isinstance(reason, str):
            response.finish_reason = reason
        else:
            response.error = f"finish_reason {json.dumps(reason)[:80]} is not a string"


def error_text(error: Any) -> str:
    """A server's error object in words: its message, then its type, param and code; an error
    without a message says so (an empty reason would read as nothing at all)."""
    if not isinstance(error, dict):
        text = str(error).strip()
        return text or f"an error without a message ({json.dumps(error)})"
    message = error.get("message")
    message = message.strip() if isinstance(message, str) else ""
    # param: the request field a refusal names (vLLM's), worth saying beside a message only
    named = ("type", "param", "code") if message else ("type", "code")
    parts = [f"{key} {error[key]}" for key in named if error.get(key) not in (None, "")]
    said = f" ({', '.join(parts)})" if parts else ""
    if message:
        return message + said
    return f"an error without a message{said or ': ' + json.dumps(error)[:200]}"


def _decode_plain_first(response: Response, obj: Any, t_ns: int) -> None:
    """:func:`decode_chunk` with a chunk of the plain shape read by the compiled per-read
    path (``_readpath.plain_choice``: the values to write, or None for anything else)."""
    plain = plain_choice(obj)
    if plain is None:
        decode_chunk(response, obj, t_ns)
        return
    text, reason, usage = plain
    if text is not None:
        if response.finish_reason is not None:  # content after it: decode_chunk's words
            decode_chunk(response, obj, t_ns)
            return
        response.chunks.append((t_ns, text))
    if reason is not None:
        response.finish_reason = reason
    if usage is not None:
        response.usage = usage


#: The decoder the sinks use: :func:`decode_chunk`, its plain chunks read by the compiled
#: per-read path when it was built.
DECODE: Decoder = decode_chunk
if compiled is not None:
    plain_choice = compiled.plain_choice
    DECODE = _decode_plain_first


def body_for(api: Api, request: dict[str, Any], *, stream: bool) -> dict[str, Any]:
    """``request`` with the stream flags set (usage included in the stream)."""
    body = dict(request)
    body["stream"] = stream
    if stream:
        options = dict(body.get("stream_options") or {})
        options.setdefault("include_usage", True)
        body["stream_options"] = options
    else:
        body.pop("stream_options", None)
    return body


def encode(pool: ConnectionPool, api: Api, request: dict[str, Any], *, stream: bool) -> bytes:
    """The wire bytes of one request (build once, send many times in a load test)."""
    body = json.dumps(body_for(api, request, stream=stream), separators=(",", ":"))
    return pool.encode("POST", PATHS[api], body.encode())


def limits_of(request: dict[str, Any]) -> Limits:
    """What ``request`` allows the answer: ``max_completion_tokens`` (or ``max_tokens``, as
    vLLM reads them) per choice, ``n`` choices, ``echo``."""
    most = whole_number(request.get("max_completion_tokens")) or whole_number(
        request.get("max_tokens")
    )
    choices = whole_number(request.get("n")) or 1
    return Limits(most, max(choices, 1), bool(request.get("echo")))


def sink(*, stream: bool, keep_raw: bool = False, limits: Limits = NO_LIMITS) -> Sink:
    """A fresh sink that decodes an OpenAI response (streamed or not); ``limits``: what the
    request allowed (:func:`limits_of`), which the answer's counts are checked against."""
    if stream:
        return STREAM_SINK(DECODE, keep_raw=keep_raw, ending=ENDING, limits=limits)
    return BodySinkJson(DECODE, keep_raw=keep_raw, ending=ENDING, limits=limits)


async def complete(
    pool: ConnectionPool,
    request: dict[str, Any],
    *,
    api: Api = "completions",
    stream: bool = True,
    keep_raw: bool = False,
    timeout_s: float | None = None,
) -> Response:
    """Send one completions (or chat) request and return what came back.

    ``keep_raw`` keeps every parsed JSON chunk in ``Response.raw`` (logprobs live there).
    Connection failures raise :class:`~testbed.clients.http.HttpClientError`; an HTTP error
    status, an error event, an answer cut short (no ``[DONE]``, no finish reason, the
    connection closed mid-body) and counts that cannot be true for ``request`` are returned
    as ``Response.error``.
    """
    target = sink(stream=stream, keep_raw=keep_raw, limits=limits_of(request))
    response = target.response
    await pool.send(encode(pool, api, request, stream=stream), target, timeout_s)
    return response


async def get(pool: ConnectionPool, path: str, timeout_s: float = 10.0) -> Response:
    """``GET path``: the response, its JSON body (if it was JSON) in ``raw``. A server that
    does not answer within ``timeout_s`` is a :class:`ReadTimeout`."""
    target = BodySinkJson(lambda _r, _o, _t: None, keep_raw=True)
    try:
        async with asyncio.timeout(timeout_s):  # the connection too (a host that drops SYNs)
            await pool.send(pool.encode("GET", path), target, timeout_s)
    except TimeoutError as exc:  # the pool's ReadTimeout, or this wait's (a connect that hangs)
        raise ReadTimeout(f"GET {path}: no answer within {timeout_s:g} s") from exc
    return target.response


async def get_json(pool: ConnectionPool, path: str, timeout_s: float = 10.0) -> Any:
    """``GET path`` and the parsed JSON body (None on a non-2xx status)."""
    response = await get(pool, path, timeout_s)
    return response.raw[0] if response.ok and response.raw else None


async def find_model(pool: ConnectionPool, timeout_s: float = 10.0, hint: str = "") -> str:
    """The first model ``GET /v1/models`` lists. When it lists none, an :class:`InputError`
    says what the URL answered instead (an HTML page, a 404, JSON without models: the URL
    is wrong, or the model must be named — ``hint`` says how); a server error or no answer
    is an :class:`HttpClientError` (a :class:`ServerStatusError` for the server's error)."""
    response = await get(pool, "/v1/models", timeout_s)
    found = _model_ids(response.raw[0]) if response.ok and response.raw else []
    if found:
        return found[0]
    status, kind = response.status, response.headers.get("content-type", "").split(";")[0]
    if status >= 500:
        raise ServerStatusError(f"GET /v1/models answered {response.error}", status)
    fix = f" — check the URL, or {hint}" if hint else " — check the URL"
    if "html" in kind:
        what = f"an HTML page (HTTP {status}: a login page, a proxy, a web UI?), not a model list"
    elif status in (401, 403):
        what = f"HTTP {status}: it wants an API key"
        fix = " — give it with --api-key-env NAME (campaign: api_key: ${env:NAME})"
    elif status == 404:
        what = "404 Not Found: no OpenAI-style API at this base URL (a TGI server? --api tgi)"
    elif not 200 <= status < 300:
        what = f"{response.error}"
    elif not response.raw:
        what = f"HTTP {status} with a body that is not JSON ({kind or 'no content type'})"
    else:
        what = f"JSON that lists no model: {json.dumps(response.raw[0])[:120]}"
    raise InputError(f"GET /v1/models answered {what}{fix}")


def _model_ids(body: Any) -> list[str]:
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return []
    return [str(item["id"]) for item in data if isinstance(item, dict) and "id" in item]


async def list_models(pool: ConnectionPool, timeout_s: float = 10.0) -> list[str]:
    """The model ids the server lists at ``GET /v1/models`` (empty if it lists none)."""
    return _model_ids(await get_json(pool, "/v1/models", timeout_s))


async def discover_model(pool: ConnectionPool, timeout_s: float = 10.0) -> str | None:
    """The first model the server lists, or None."""
    models = await list_models(pool, timeout_s)
    return models[0] if models else None
