"""OpenAI's Responses API: ``POST /v1/responses``, streamed as typed server-sent events.

A streamed answer is a sequence of events, each ``event: <type>`` then ``data: {"type":
<type>, "sequence_number": n, ...}`` (vLLM writes both lines; the ``type`` in the JSON is
what is read). For a text answer:

- ``response.created`` and ``response.in_progress`` (the response object, no usage yet);
- ``response.output_item.added``, ``response.content_part.added``;
- ``response.output_text.delta`` with ``delta``, the text — each one a content chunk (TTFT is
  the first one's arrival, as a chat stream's first content);
- ``response.output_text.done``, ``response.content_part.done``, ``response.output_item.done``;
- the end: ``response.completed`` (OpenAI and vLLM), or ``response.incomplete`` (OpenAI, when
  ``max_output_tokens`` stopped it; vLLM says so with ``response.completed`` and ``status:
  incomplete``). Its ``response.usage`` is ``{input_tokens, output_tokens, total_tokens}``.

No ``data: [DONE]`` follows: the end event ends the stream, and an event after it is the
server's error. A failure is ``response.failed`` (``response.error {code, message}``) or an
``error`` event (``{code, message, param}``; vLLM writes its error object, ``{"error":
{...}}``). Other events (reasoning, tool calls, annotations) are read as the chat decoder
reads a reasoning delta: not the answer's text.

The finish reason is the response's: ``stop`` when completed, ``length`` when incomplete for
``max_output_tokens``, else the incomplete reason. Usage is checked in its own names (whole
numbers ≥ 0, ``total_tokens`` = input + output, output within ``max_output_tokens``, at least
one token per text delta) and kept in OpenAI's ``usage`` shape (``prompt_tokens``,
``completion_tokens``), which records read. A non-streamed answer is the response object
itself, its text in ``output[].content[]`` parts of type ``output_text``.
"""

from __future__ import annotations

import json
from typing import Any

from testbed.clients import counts
from testbed.clients.counts import NO_LIMITS, Limits, whole_number
from testbed.clients.http import ConnectionPool
from testbed.clients.openai import error_text
from testbed.clients.response import BodySinkJson, Ending, Response, StreamSink

PATH = "/v1/responses"

#: A complete answer ends with its end event (which also gives the finish reason).
ENDING = Ending("a response.completed event")

#: Event types that end the stream with an answer.
_END = ("response.completed", "response.incomplete")

#: Names of the Responses API's counts, by the OpenAI usage names records read.
_NAMES = {
    "prompt_tokens": "input_tokens",
    "completion_tokens": "output_tokens",
    "total_tokens": "total_tokens",
}


def request_body(prompt: str, model: str, max_output_tokens: int | None) -> dict[str, Any]:
    """The body of one text request (None: no ``max_output_tokens``, the server's limit).
    ``store: false``: a load test's answers are not to be kept by the server (vLLM and OpenAI
    keep stored responses for later retrieval)."""
    body: dict[str, Any] = {"model": model, "input": prompt}
    if max_output_tokens is not None:
        body["max_output_tokens"] = max_output_tokens
    body["store"] = False
    return body


def encode(pool: ConnectionPool, request: dict[str, Any], *, stream: bool) -> bytes:
    """The wire bytes of one request (built once, sent many times in a load test)."""
    body = json.dumps({**request, "stream": stream}, separators=(",", ":"))
    return pool.encode("POST", PATH, body.encode())


def limits_of(request: dict[str, Any]) -> Limits:
    """What ``request`` allows the answer: ``max_output_tokens`` (one output)."""
    return Limits(whole_number(request.get("max_output_tokens")))


def decode_event(response: Response, obj: Any, t_ns: int) -> None:
    """Read one stream event (or a whole response object) into ``response``."""
    if not isinstance(obj, dict):
        response.error = f"not a Responses event (JSON {type(obj).__name__}): {str(obj)[:200]}"
        return
    kind = obj.get("type")
    if kind == "response.output_text.delta":
        _delta(response, obj.get("delta"), t_ns)
    elif kind in _END:
        _end(response, obj.get("response"), kind)
    elif kind == "response.failed":
        failed = obj.get("response")
        error = failed.get("error") if isinstance(failed, dict) else None
        response.error = error_text(error or "response.failed without an error")
    elif kind == "error" or obj.get("error"):
        response.error = error_text(obj.get("error") or obj)
    elif kind is None and obj.get("object") == "response":  # a whole, non-streamed answer
        _whole(response, obj, t_ns)
    elif not isinstance(kind, str):
        response.error = f"a Responses event without a type: {json.dumps(obj)[:200]}"


def _delta(response: Response, delta: Any, t_ns: int) -> None:
    if not isinstance(delta, str):
        response.error = f"output_text.delta {json.dumps(delta)[:80]} is not a string"
    elif delta:
        response.chunks.append((t_ns, delta))


def _end(response: Response, body: Any, kind: str) -> None:
    """The end event: the finish reason and usage of the response object it carries."""
    response.ended = True
    if not isinstance(body, dict):
        response.error = f"{kind} without its response object"
        return
    status = body.get("status")
    if status == "failed":
        response.error = error_text(body.get("error") or f"{kind} with status failed")
        return
    if status == "completed" and kind != "response.incomplete":
        response.finish_reason = "stop"
    elif status == "incomplete":
        details = body.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        response.finish_reason = "length" if reason == "max_output_tokens" else str(reason)
    else:
        response.error = f"{kind} with status {json.dumps(status)[:40]}"
        return
    usage = body.get("usage")
    if usage is not None:
        response.usage = _usage(usage)


def _usage(usage: Any) -> Any:
    """The Responses usage in OpenAI's names (what is not an object stays, for the check)."""
    if not isinstance(usage, dict):
        return usage
    return {ours: usage.get(theirs) for ours, theirs in _NAMES.items()}


def _whole(response: Response, body: dict[str, Any], t_ns: int) -> None:
    """A non-streamed answer: the text of its output_text parts is the one content chunk."""
    texts: list[Any] = []
    for item in body.get("output") or []:
        parts = item.get("content") if isinstance(item, dict) else None
        for part in parts if isinstance(parts, list) else []:
            if isinstance(part, dict) and part.get("type") == "output_text":
                texts.append(part.get("text"))
    if not all(isinstance(t, str) for t in texts):
        response.error = "an output_text part whose text is not a string"
        return
    _delta(response, "".join([str(t) for t in texts]), t_ns)
    _end(response, body, "the response")


def check_claims(response: Response, limits: Limits) -> str | None:
    """:func:`~testbed.clients.counts.check` in the Responses API's words: its usage
    names, ``max_output_tokens`` for ``max_tokens``, text deltas for chunks."""
    problem = counts.check(response, limits)
    if problem is None:
        return None
    for ours, theirs in _NAMES.items():
        problem = problem.replace(f"usage.{ours}", f"usage.{theirs}").replace(ours, theirs)
    problem = problem.replace("max_tokens", "max_output_tokens")
    return problem.replace("text chunk", "output_text.delta")


class ResponsesStreamSink(StreamSink):
    """The streamed sink, its answer's claims checked in the Responses API's words."""

    __slots__ = ()

    def _check_claims(self) -> str | None:
        return check_claims(self.response, self._limits)


class ResponsesBodySink(BodySinkJson):
    """The non-streamed sink, likewise."""

    __slots__ = ()

    def _check_claims(self) -> str | None:
        return check_claims(self.response, self._limits)


def sink(
    *, stream: bool, keep_raw: bool = False, limits: Limits = NO_LIMITS
) -> ResponsesStreamSink | ResponsesBodySink:
    """A fresh sink that decodes a Responses answer (streamed or not); ``limits``: what the
    request allowed (:func:`limits_of`)."""
    if stream:
        return ResponsesStreamSink(decode_event, keep_raw=keep_raw, ending=ENDING, limits=limits)
    return ResponsesBodySink(decode_event, keep_raw=keep_raw, ending=ENDING, limits=limits)


async def respond(
    pool: ConnectionPool,
    request: dict[str, Any],
    *,
    stream: bool = True,
    keep_raw: bool = False,
    timeout_s: float | None = None,
) -> Response:
    """Send one Responses request and return what came back (errors as
    :func:`testbed.clients.openai.complete` returns them)."""
    target = sink(stream=stream, keep_raw=keep_raw, limits=limits_of(request))
    await pool.send(encode(pool, request, stream=stream), target, timeout_s)
    return target.response
