"""OpenAI dialects: ``/v1/completions`` and ``/v1/chat/completions``, shaped like vLLM's.

Streamed chunks are built from pre-encoded fragments (the token texts are JSON-encoded once,
at import), so a 64-token stream costs a few microseconds of string joins, not 64 json.dumps.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Self

from testbed.config.sim import SimParams
from testbed.servers.sim.dialect import (
    BadRequest,
    GenerationRequest,
    load_json,
    opt_bool,
    opt_int,
    stop_list,
)
from testbed.servers.sim.logprobs import chat_logprobs, check_count, completion_logprobs
from testbed.servers.sim.text import VOCABULARY_JSON, Generation, count_tokens

_DONE = b"data: [DONE]\n\n"


def _finish(gen: Generation) -> str:
    return "length" if gen.finish_reason == "length" else "stop"


def _common(data: dict[str, Any], stream_default: bool = False) -> dict[str, Any]:
    """Options both OpenAI endpoints share."""
    if opt_int(data, "n", 1) not in (None, 1):
        raise BadRequest("the simulator serves n=1 only", "n")
    stream = opt_bool(data, "stream") if "stream" in data else stream_default
    options = data.get("stream_options") or {}
    if not isinstance(options, dict):
        raise BadRequest("'stream_options' must be an object", "stream_options")
    seed = data.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise BadRequest(f"'seed' must be an integer, got {seed!r}", "seed")
    model = data.get("model")
    if model is not None and not isinstance(model, str):
        raise BadRequest("'model' must be a string", "model")
    return {
        "stream": stream,
        "include_usage": stream and opt_bool(options, "include_usage"),
        "ignore_eos": opt_bool(data, "ignore_eos"),
        "stop": stop_list(data.get("stop")),
        "seed": seed,
        "model": model,
    }


class _OpenAIRequest(GenerationRequest):
    object_chunk: ClassVar[str]
    #: Log-probabilities asked for: the number of alternatives per token (completions'
    #: ``logprobs``, chat's ``top_logprobs``), or None when not asked.
    top_k: int | None = None
    vocab_size: int = 0

    def asking(self, top_k: int | None, params: SimParams) -> Self:
        self.top_k, self.vocab_size = top_k, params.vocab_size
        return self

    def _logprobs(self, gen: Generation, tokens: range, offset: int = 0) -> Any:
        """The choice's ``logprobs`` value (None when the request did not ask)."""
        del gen, tokens, offset
        return None

    def _mids(self, gen: Generation, mid: str) -> list[str]:
        """The part of each token's event after its text: ``mid`` with its logprobs."""
        if self.top_k is None:
            return [mid] * len(gen.ids)
        out, offset = [], 0
        for i, text in enumerate(gen.texts):
            value = json.dumps(self._logprobs(gen, range(i, i + 1), offset), separators=(",", ":"))
            out.append(mid.replace('"logprobs":null', f'"logprobs":{value}', 1))
            offset += len(text)
        return out

    def tail(self, gen: Generation) -> bytes:
        if not self.include_usage:
            return _DONE
        usage = json.dumps(self.usage(gen), separators=(",", ":"))
        return (
            f'data: {{"id":"{self.rid}","object":"{self.object_chunk}","created":{self.created},'
            f'"model":{json.dumps(self.model_name)},"choices":[],"usage":{usage}}}\n\n'
        ).encode() + _DONE

    def _head(self) -> str:
        return (
            f'data: {{"id":"{self.rid}","object":"{self.object_chunk}","created":{self.created},'
            f'"model":{json.dumps(self.model_name)},"choices":[{{"index":0,'
        )

    def _token_events(self, gen: Generation, head: str, mid: str) -> list[str]:
        """One event per token: ``head``, the token's text, ``mid`` with its logprobs; the
        last event carries the finish reason."""
        mids = self._mids(gen, mid)
        out = [head + tok + m for tok, m in zip(self._token_jsons(gen), mids, strict=True)]
        if out:
            finish = f'"finish_reason":"{_finish(gen)}"'
            out[-1] = out[-1].replace('"finish_reason":null', finish, 1)
        return out

    def _token_jsons(self, gen: Generation) -> list[str]:
        if all(len(t) == 4 for t in gen.texts):  # whole vocabulary tokens: pre-encoded
            return [VOCABULARY_JSON[i] for i in gen.ids]
        return [json.dumps(t) for t in gen.texts]


class CompletionRequest(_OpenAIRequest):
    """``POST /v1/completions``."""

    object_chunk = "text_completion"

    @classmethod
    def parse(cls, body: bytes, params: SimParams, *, stream: bool = False) -> CompletionRequest:
        data = load_json(body)
        prompt = data.get("prompt")
        prompt_tokens = None
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        if isinstance(prompt, list) and prompt and all(type(t) is int for t in prompt):
            prompt_tokens = len(prompt)  # token ids: counted as given, keyed by their text
            prompt = " ".join(map(str, prompt))
        if not isinstance(prompt, str):
            raise BadRequest("'prompt' must be a string or a list of token ids", "prompt")
        request = cls(
            params,
            prompt=prompt,
            prompt_tokens=prompt_tokens,
            max_tokens=opt_int(data, "max_tokens", 1),
            **_common(data, stream),
        )
        return request.asking(check_count(opt_int(data, "logprobs", 0), "logprobs"), params)

    def _logprobs(self, gen: Generation, tokens: range, offset: int = 0) -> Any:
        if self.top_k is None:
            return None
        return completion_logprobs(gen, self.top_k, self.vocab_size, tokens, offset)

    def events(self, gen: Generation) -> list[bytes]:
        mid = ',"logprobs":null,"finish_reason":null,"stop_reason":null}]}\n\n'
        return [e.encode() for e in self._token_events(gen, self._head() + '"text":', mid)]

    def whole(self, gen: Generation) -> bytes:
        choice = {
            "index": 0,
            "text": gen.text,
            "logprobs": self._logprobs(gen, range(len(gen.ids))),
            "finish_reason": _finish(gen),
            "stop_reason": None,
        }
        return json.dumps(
            {
                "id": self.rid,
                "object": "text_completion",
                "created": self.created,
                "model": self.model_name,
                "choices": [choice],
                "usage": self.usage(gen),
            }
        ).encode()


class ChatRequest(_OpenAIRequest):
    """``POST /v1/chat/completions``: the prompt is every message's content, in order."""

    object_chunk = "chat.completion.chunk"
    answer_joint = "\nassistant\n"  # chat_prompt's way of starting the answer's message

    @classmethod
    def parse(cls, body: bytes, params: SimParams, *, stream: bool = False) -> ChatRequest:
        data = load_json(body)
        prompt = chat_prompt(data.get("messages"))
        max_tokens = opt_int(data, "max_completion_tokens", 1)
        if max_tokens is None:
            max_tokens = opt_int(data, "max_tokens", 1)
        request = cls(
            params,
            prompt=prompt,
            prompt_tokens=chat_prompt_tokens(data["messages"], params),
            max_tokens=max_tokens,
            **_common(data, stream),
        )
        top = check_count(opt_int(data, "top_logprobs", 0), "top_logprobs")
        if not opt_bool(data, "logprobs"):
            if top is not None:
                raise BadRequest("'top_logprobs' needs 'logprobs': true", "top_logprobs")
            return request
        return request.asking(top or 0, params)

    def _logprobs(self, gen: Generation, tokens: range, offset: int = 0) -> Any:
        if self.top_k is None:
            return None
        return chat_logprobs(gen, self.top_k, self.vocab_size, tokens)

    def events(self, gen: Generation) -> list[bytes]:
        mid = '},"logprobs":null,"finish_reason":null}]}\n\n'
        out = self._token_events(gen, self._head() + '"delta":{"content":', mid)
        if out:
            # vLLM sends the role first, in its own chunk, with the first token (written after
            # the finish reason is set: a one-token answer's role chunk must not carry it).
            role = self._head() + '"delta":{"role":"assistant","content":""' + mid
            out[0] = role + out[0]
        return [e.encode() for e in out]

    def whole(self, gen: Generation) -> bytes:
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": gen.text},
            "logprobs": self._logprobs(gen, range(len(gen.ids))),
            "finish_reason": _finish(gen),
        }
        return json.dumps(
            {
                "id": self.rid,
                "object": "chat.completion",
                "created": self.created,
                "model": self.model_name,
                "choices": [choice],
                "usage": self.usage(gen),
            }
        ).encode()


def content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # [{"type": "text", "text": "..."}]
        return " ".join(
            p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    if content is None:
        return ""
    raise BadRequest("a message's 'content' must be a string or a list of parts", "messages")


def chat_prompt(messages: Any) -> str:
    """The text the simulator keys its output on: role and content of every message."""
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list", "messages")
    parts = []
    for message in messages:
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise BadRequest("each message needs a string 'role'", "messages")
        parts.append(f"{message['role']}\n{content_text(message.get('content'))}")
    return "\n".join(parts)


def chat_prompt_tokens(messages: list[dict[str, Any]], params: SimParams) -> int:
    """Prompt tokens of a chat: the tokens of each message's content (roles are free)."""
    return sum(count_tokens(content_text(m.get("content")), params.tokenizer) for m in messages)
