"""The OpenAI protocol of the reference server: /v1/completions and /v1/chat/completions.

Requests are mapped onto :class:`SamplingParams`; answers follow vLLM's shapes, including
the streamed form (SSE chunks, ``stream_options.include_usage``, ``data: [DONE]``) and
logprobs in the OpenAI format — ``logprobs: N`` for completions, ``logprobs: true`` with
``top_logprobs: N`` for chat. As in OpenAI and vLLM, ``temperature`` defaults to 1.0: send
``temperature: 0`` for greedy, deterministic output. ``max_tokens`` defaults to 16 for
completions (OpenAI's default) and to the rest of the context for chat.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from testbed.core.clock import wall_seconds
from testbed.servers.http1 import Request
from testbed.servers.reference.context import BadRequest, ServerContext, number, sampling
from testbed.servers.reference.engine import Step
from testbed.servers.reference.http import Responder, body_json

MAX_LOGPROBS = 20


@dataclass
class _Call:
    chat: bool
    prompt: list[int]
    stream: bool
    include_usage: bool
    top: int | None  # alternatives wanted per token (None = no logprobs)
    id: str
    created: int
    model: str


def _parse(ctx: ServerContext, body: Any, chat: bool) -> tuple[_Call, Any]:
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    if int(body.get("n", 1) or 1) != 1:
        raise BadRequest("n > 1 is not supported by the reference server; send n: 1")
    if body.get("echo"):
        raise BadRequest("echo is not supported by the reference server")
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise BadRequest("messages must be a non-empty list")
        prompt = ctx.chat_ids(messages, bool(body.get("add_generation_prompt", True)))
        top = int(number(body, "top_logprobs", 0)) if body.get("logprobs") else None
        default_max = ctx.max_len - len(prompt)
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    else:
        prompt = ctx.prompt_ids(body.get("prompt"))
        top = None if body.get("logprobs") is None else int(number(body, "logprobs", 0))
        default_max = 16
        max_tokens = body.get("max_tokens")
    if top is not None and not 0 <= top <= MAX_LOGPROBS:
        raise BadRequest(f"logprobs asks for {top} alternatives; the limit is {MAX_LOGPROBS}")
    params = sampling(
        body, max_tokens=default_max if max_tokens is None else max_tokens, logprobs=top
    )
    options = body.get("stream_options") or {}
    call = _Call(
        chat=chat,
        prompt=prompt,
        stream=bool(body.get("stream", False)),
        include_usage=bool(options.get("include_usage", False)),
        top=top,
        id=("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex,
        created=wall_seconds(),
        model=str(body.get("model") or ctx.model_name),
    )
    return call, params


async def handle(ctx: ServerContext, request: Request, out: Responder, chat: bool) -> None:
    """Serve one completion or chat completion request, streamed or whole."""
    call, params = _parse(ctx, body_json(request), chat)
    ctx.check_model(call.model)
    async with aclosing(ctx.engine.generate(call.prompt, params)) as steps:
        if call.stream:
            await _stream(call, steps, out)
        else:
            out.send_json(200, await _whole(call, steps))


def _usage(call: _Call, completion_tokens: int) -> dict[str, int]:
    prompt = len(call.prompt)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt + completion_tokens,
    }


def _token_logprobs(call: _Call, steps: list[Step]) -> Any:
    """OpenAI's logprobs object for the tokens of ``steps`` (None when none were asked)."""
    tokens = [s.token for s in steps if s.token is not None and s.token.logprob is not None]
    if call.top is None:
        return None
    if call.chat:
        return {
            "content": [
                {
                    "token": t.text,
                    "logprob": t.logprob,
                    "bytes": list(t.text.encode()),
                    "top_logprobs": [
                        {"token": text, "logprob": lp, "bytes": list(text.encode())}
                        for _id, text, lp in t.top
                    ],
                }
                for t in tokens
            ]
        }
    offsets, at = [], 0
    for t in tokens:
        offsets.append(at)
        at += len(t.text)
    return {
        "tokens": [t.text for t in tokens],
        "token_logprobs": [t.logprob for t in tokens],
        "top_logprobs": [{text: lp for _id, text, lp in t.top} for t in tokens],
        "text_offset": offsets,
    }


def _choice(call: _Call, text: str, steps: list[Step], finish: str | None, first: bool) -> Any:
    choice: dict[str, Any] = {"index": 0, "logprobs": _token_logprobs(call, steps)}
    if call.chat:
        key = "delta" if call.stream else "message"
        message: dict[str, Any] = {"content": text} if (text or first or not call.stream) else {}
        if first or not call.stream:
            message = {"role": "assistant", **message}
        choice[key] = message
    else:
        choice["text"] = text
    choice["finish_reason"] = finish
    choice["stop_reason"] = None
    return choice


def _envelope(call: _Call, choices: list[Any]) -> dict[str, Any]:
    kind = "chat.completion" if call.chat else "text_completion"
    if call.stream and call.chat:
        kind = "chat.completion.chunk"
    return {
        "id": call.id,
        "object": kind,
        "created": call.created,
        "model": call.model,
        "choices": choices,
    }


async def _whole(call: _Call, steps: AsyncIterator[Step]) -> dict[str, Any]:
    collected = [step async for step in steps]
    final = collected[-1]
    if final.finish_reason == "error":
        raise RuntimeError(final.error)
    text = "".join(s.text for s in collected)
    answer = _envelope(call, [_choice(call, text, collected, final.finish_reason, True)])
    tokens = sum(1 for s in collected if s.token is not None)
    answer["usage"] = _usage(call, tokens)
    return answer


async def _stream(call: _Call, steps: AsyncIterator[Step], out: Responder) -> None:
    out.start_stream()
    tokens, first = 0, True
    if call.chat:  # vLLM opens a chat stream with the role alone
        out.send_event(json.dumps(_envelope(call, [_choice(call, "", [], None, True)])))
        first = False
    async for step in steps:
        tokens += step.token is not None
        if step.finish_reason == "error":
            out.send_event(json.dumps({"error": {"message": step.error, "code": 500}}))
            break
        if not step.text and step.finish_reason is None and call.top is None:
            continue  # nothing to say yet (a held-back stop-string prefix)
        choice = _choice(call, step.text, [step], step.finish_reason, first)
        first = False
        out.send_event(json.dumps(_envelope(call, [choice])))
    if call.include_usage:
        usage = _envelope(call, [])
        usage["usage"] = _usage(call, tokens)
        out.send_event(json.dumps(usage))
    out.send_event("[DONE]")
    out.end_stream()
