"""The TGI protocol of the reference server: /generate and /generate_stream.

TGIS's goldens came from transformers; so can testbed's. Sampling follows TGI: greedy unless
``do_sample`` is true; ``details`` returns every token with its logprob and
``top_n_tokens`` alternatives; the finish reason tells ``eos_token``, ``stop_sequence`` and
``length`` apart.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

from testbed.servers.http1 import Request
from testbed.servers.reference.context import BadRequest, ServerContext, sampling
from testbed.servers.reference.engine import Step, TokenInfo
from testbed.servers.reference.http import Responder, body_json
from testbed.servers.reference.sampling import SamplingParams

DEFAULT_MAX_NEW_TOKENS = 100
MAX_TOP_N = 20


def _parse(ctx: ServerContext, body: Any) -> tuple[list[int], SamplingParams, dict[str, Any]]:
    if not isinstance(body, dict) or not isinstance(body.get("inputs"), str):
        raise BadRequest('the body must be {"inputs": "<text>", "parameters": {…}}')
    p = body.get("parameters") or {}
    if not isinstance(p, dict):
        raise BadRequest("parameters must be an object")
    if p.get("best_of") not in (None, 1):
        raise BadRequest("best_of is not supported by the reference server")
    top_n = int(p.get("top_n_tokens") or 0)
    if not 0 <= top_n <= MAX_TOP_N:
        raise BadRequest(f"top_n_tokens must lie in 0..{MAX_TOP_N}")
    fields = dict(p)
    if not p.get("do_sample"):
        fields["temperature"] = 0.0
    params = sampling(
        fields,
        max_tokens=p.get("max_new_tokens") or DEFAULT_MAX_NEW_TOKENS,
        logprobs=top_n,
    )
    prompt = ctx.prompt_ids(body["inputs"])
    return prompt, params, p


def _token(t: TokenInfo) -> dict[str, Any]:
    return {"id": t.id, "text": t.text, "logprob": t.logprob, "special": t.special}


def _top(t: TokenInfo) -> list[dict[str, Any]]:
    return [{"id": i, "text": text, "logprob": lp, "special": False} for i, text, lp in t.top]


def _details(steps: list[Step], params: SamplingParams, top_n: int) -> dict[str, Any]:
    final = steps[-1]
    tokens = [s.token for s in steps if s.token is not None]
    details: dict[str, Any] = {
        "finish_reason": final.stop_kind or "length",
        "generated_tokens": len(tokens),
        "seed": params.seed,
        "prefill": [],
        "tokens": [_token(t) for t in tokens],
        "best_of_sequences": None,
    }
    if top_n:
        details["top_tokens"] = [_top(t) for t in tokens]
    return details


async def handle(ctx: ServerContext, request: Request, out: Responder, stream: bool) -> None:
    """Serve ``/generate`` (``stream=False``) or ``/generate_stream``."""
    body = body_json(request)
    prompt, params, raw = _parse(ctx, body)
    prefix = body["inputs"] if raw.get("return_full_text") else ""
    async with aclosing(ctx.engine.generate(prompt, params)) as steps:
        if stream:
            await _stream(steps, params, prefix, out)
            return
        collected = [s async for s in steps]
    if collected[-1].finish_reason == "error":
        raise RuntimeError(collected[-1].error)
    answer: dict[str, Any] = {"generated_text": prefix + "".join(s.text for s in collected)}
    if raw.get("details"):
        answer["details"] = _details(collected, params, params.logprobs or 0)
    out.send_json(200, answer)


async def _stream(
    steps: AsyncIterator[Step], params: SamplingParams, prefix: str, out: Responder
) -> None:
    out.start_stream()
    text, count = prefix, 0
    async for step in steps:
        if step.finish_reason == "error" or step.token is None:
            out.send_event(json.dumps({"error": step.error, "error_type": "generation"}))
            break
        text += step.text
        event: dict[str, Any] = {
            "index": count,
            "token": _token(step.token),
            "generated_text": None,
            "details": None,
        }
        count += 1
        if params.logprobs:
            event["top_tokens"] = _top(step.token)
        if step.finish_reason is not None:
            event["generated_text"] = text
            event["details"] = {
                "finish_reason": step.stop_kind or "length",
                "generated_tokens": count,
                "seed": params.seed,
            }
        out.send_event(json.dumps(event))
    out.end_stream()
