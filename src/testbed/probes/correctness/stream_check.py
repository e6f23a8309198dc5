"""Checks of a stream itself, beyond what it adds up to.

A streamed answer must be well formed: every event parses, chunks belong to one response,
token counts only grow, and exactly one final chunk carries the stop reason (and, for
OpenAI with ``include_usage``, the usage comes once at the end). The merged text is compared
with the unary answer elsewhere (the streaming twin); here each problem is one line.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import orjson

from testbed.probes.correctness.cases import ProtocolName
from testbed.probes.correctness.exchange import Exchange


def check_stream(exchange: Exchange) -> list[str]:
    """Problems of ``exchange``'s stream (empty when it is well formed)."""
    problems: list[str] = []
    if exchange.stream_error is not None:  # the client's words first: a lie, or cut short
        problems.append(exchange.stream_error)
    if exchange.incomplete_tail:
        problems.append("the stream ended inside an event (no blank line after it)")
    objects: list[Any] = []
    done_at: int | None = None
    for n, payload in enumerate(exchange.payloads):
        if payload.strip() == b"[DONE]":
            done_at = n
            continue
        if done_at is not None:
            problems.append(f"event {n} arrived after [DONE]")
        try:
            obj = orjson.loads(payload)
        except ValueError:
            problems.append(f"event {n} is not JSON: {payload[:80]!r}")
            continue
        if not isinstance(obj, dict):
            problems.append(f"event {n} is not a JSON object")
            continue
        objects.append(obj)
    if not objects:
        problems.append("the stream carried no event")
        return problems
    return problems + _CHECKS[exchange.protocol](objects, done_at is not None)


def _tgis(messages: list[dict[str, Any]], _done: bool) -> list[str]:
    """A TGIS stream: the input token count first, counts that only grow, one stop reason
    (on the last message)."""
    problems = []
    if not messages[0].get("input_token_count"):
        problems.append("the first message does not carry input_token_count")
    counts = [int(m.get("generated_token_count") or 0) for m in messages]
    if any(b < a for a, b in itertools.pairwise(counts)):
        problems.append(f"generated_token_count went down during the stream: {counts[:20]}")
    finals = [
        n for n, m in enumerate(messages) if m.get("stop_reason") not in (None, "NOT_FINISHED")
    ]
    if len(finals) != 1:
        problems.append(f"{len(finals)} messages carry a stop_reason; exactly one (the last) must")
    elif finals[0] != len(messages) - 1:
        problems.append("the message with the stop_reason is not the last one")
    listed = sum(len(m.get("tokens") or []) for m in messages)
    if listed and listed != counts[-1]:
        problems.append(f"{listed} tokens listed but generated_token_count is {counts[-1]}")
    return problems


def _openai(chunks: list[dict[str, Any]], done: bool) -> list[str]:
    problems = [] if done else ["the stream did not end with data: [DONE]"]
    ids = {c.get("id") for c in chunks if "error" not in c}
    if len(ids) > 1:
        problems.append(f"chunks carry {len(ids)} different ids; a stream is one response")
    errors = [c["error"] for c in chunks if c.get("error")]
    if errors:
        problems.append(f"the stream carried an error: {str(errors[0])[:200]}")
    finals = [
        n
        for n, c in enumerate(chunks)
        if any(ch.get("finish_reason") for ch in c.get("choices") or [])
    ]
    if len(finals) != 1:
        problems.append(f"{len(finals)} chunks carry a finish_reason; exactly one must")
    last_final = finals[-1] if finals else len(chunks)
    for n in range(last_final + 1, len(chunks)):
        if any(_content(ch) for ch in chunks[n].get("choices") or []):
            problems.append(f"chunk {n} carries text after the final chunk")
            break
    usages = [(n, c["usage"]) for n, c in enumerate(chunks) if isinstance(c.get("usage"), dict)]
    if not usages:
        problems.append("no chunk carries usage (stream_options.include_usage was asked)")
        return problems
    counts = [u.get("completion_tokens") for _, u in usages]
    if any(not isinstance(c, int) for c in counts):
        problems.append("a usage chunk has no integer completion_tokens")
        return problems
    if any(b < a for a, b in itertools.pairwise(counts)):
        problems.append(f"completion_tokens went down during the stream: {counts}")
    if finals and usages[-1][0] < finals[-1]:
        problems.append("the final usage came before the chunk with the finish_reason")
    total = counts[-1]
    pieces = sum(1 for c in chunks for ch in c.get("choices") or [] if _content(ch))
    if pieces > total:
        problems.append(f"{pieces} text chunks but completion_tokens is {total}")
    logged = _logprob_tokens(chunks)
    if logged is not None and logged != total:
        problems.append(f"logprobs cover {logged} tokens but completion_tokens is {total}")
    return problems


def _content(choice: dict[str, Any]) -> str:
    delta = choice.get("delta") or choice.get("message") or {}
    return str(choice.get("text") or delta.get("content") or "")


def _logprob_tokens(chunks: list[dict[str, Any]]) -> int | None:
    """Tokens the per-chunk logprobs describe, or None when the stream has none."""
    count, seen = 0, False
    for chunk in chunks:
        for choice in chunk.get("choices") or []:
            logprobs = choice.get("logprobs")
            if not isinstance(logprobs, dict):
                continue
            seen = True
            content = logprobs.get("content")
            listed = content if isinstance(content, list) else logprobs.get("tokens") or []
            count += len(listed)
    return count if seen else None


def _tgi(events: list[dict[str, Any]], _done: bool) -> list[str]:
    problems = []
    if any(e.get("error") for e in events):
        problems.append(f"the stream carried an error: {str(events[-1].get('error'))[:200]}")
        return problems
    tokens = [e for e in events if isinstance(e.get("token"), dict)]
    if len(tokens) != len(events):
        problems.append(f"{len(events) - len(tokens)} events carry no token")
    indexes = [e.get("index") for e in tokens]
    numbers = [i for i in indexes if isinstance(i, int)]
    if len(numbers) != len(indexes):
        problems.append("an event has no integer index")
    elif any(b <= a for a, b in itertools.pairwise(numbers)):
        problems.append(f"token indexes do not increase: {indexes[:20]}")
    finals = [n for n, e in enumerate(events) if e.get("details") is not None]
    if len(finals) != 1:
        problems.append(f"{len(finals)} events carry details; exactly one (the last) must")
    elif finals[0] != len(events) - 1:
        problems.append("the event with details is not the last one")
    texts = [n for n, e in enumerate(events) if e.get("generated_text") is not None]
    if texts and texts != finals:
        problems.append("generated_text appears on an event other than the final one")
    if finals:
        details = events[finals[-1]]["details"] or {}
        generated = details.get("generated_tokens")
        if generated != len(tokens):
            problems.append(f"details.generated_tokens is {generated}, {len(tokens)} tokens came")
        whole = events[finals[-1]].get("generated_text")
        merged = "".join(
            str(e["token"].get("text", "")) for e in tokens if not e["token"].get("special")
        )
        stopped = details.get("finish_reason") == "stop_sequence"
        cut = stopped and merged.startswith(str(whole))
        if isinstance(whole, str) and whole != merged and not cut:
            problems.append(
                f"generated_text {whole[:60]!r} is not the tokens' texts joined {merged[:60]!r}"
            )
    return problems


#: The checks of each endpoint protocol's stream: its events, and whether ``data: [DONE]``
#: came (OpenAI's end; TGI's and TGIS's streams end with their final event).
_CHECKS: dict[ProtocolName, Callable[[list[dict[str, Any]], bool], list[str]]] = {
    "openai": _openai,
    "tgi": _tgi,
    "tgis": _tgis,
}
