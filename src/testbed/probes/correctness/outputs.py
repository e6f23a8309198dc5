"""A server's answer in protocol-neutral form, read from OpenAI or TGI JSON objects, or from
TGIS gRPC messages as plain mappings (:func:`testbed.clients.tgis.response_dict`).

The same :class:`Output` comes out of a whole body and out of a merged stream, so that the
two can be compared field by field, and it is what a case's ``expected:`` describes. Token
texts and logprobs are present only when the server returned them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import Any

TopList = list[list[tuple[str, float]]]


@dataclass
class ErrorOutput:
    """A refused request: the HTTP status and the message the server gave."""

    status: int
    message: str


@dataclass
class Output:
    """What one request produced. Field names are those of ``expected:``."""

    text: str = ""
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    finish_reason: str | None = None
    token_texts: list[str] | None = None
    logprobs: list[float] | None = None
    top_logprobs: TopList | None = None
    error: ErrorOutput | None = None

    def get(self, name: str) -> Any:
        return getattr(self, name)

    def to_json(self) -> dict[str, Any]:
        """JSON-able, without the fields that are absent."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            if isinstance(value, ErrorOutput):
                value = {"status": value.status, "message": value.message}
            elif f.name == "top_logprobs":
                value = [[[t, lp] for t, lp in row] for row in value]
            out[f.name] = value
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Output:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        if isinstance(values.get("error"), dict):
            values["error"] = ErrorOutput(**values["error"])
        if values.get("top_logprobs") is not None:
            values["top_logprobs"] = [
                [(str(t), float(lp)) for t, lp in row] for row in values["top_logprobs"]
            ]
        return cls(**values)


COMPARED_FIELDS = (
    "text",
    "completion_tokens",
    "prompt_tokens",
    "finish_reason",
    "token_texts",
    "logprobs",
    "top_logprobs",
)


def error_message(body: bytes) -> str:
    """The human message of an error body (OpenAI, vLLM, TGI or FastAPI shapes)."""
    text = body.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return text
    if isinstance(data, list) and data:
        data = data[0]
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and "message" in error:
            return str(error["message"])
        for key in ("error", "message", "detail"):
            if data.get(key) is not None:
                value = data[key]
                return value if isinstance(value, str) else json.dumps(value)
    return text


def _sorted_pairs(pairs: list[tuple[str, float]]) -> list[tuple[str, float]]:
    return sorted(pairs, key=lambda p: -p[1])


class _Tokens:
    """Token texts, logprobs and alternatives collected across objects."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.logprobs: list[float] = []
        self.top: TopList = []
        self.any_top = False
        self.missing = False  # some token came without a logprob: report none

    def add(self, text: str, logprob: Any, top: list[tuple[str, float]] | None) -> None:
        self.texts.append(text)
        self.missing = self.missing or logprob is None
        self.logprobs.append(float(logprob) if logprob is not None else 0.0)
        self.top.append(_sorted_pairs(top or []))
        self.any_top = self.any_top or bool(top)

    def fill(self, out: Output) -> None:
        if self.texts:
            out.token_texts = self.texts
            out.logprobs = None if self.missing else self.logprobs
            out.top_logprobs = self.top if self.any_top else None


def _openai_logprobs(tokens: _Tokens, logprobs: Any) -> None:
    if not isinstance(logprobs, dict):
        return
    content = logprobs.get("content")
    if isinstance(content, list):  # chat
        for item in content:
            top = [(str(t["token"]), float(t["logprob"])) for t in item.get("top_logprobs") or []]
            tokens.add(str(item.get("token", "")), item.get("logprob"), top)
        return
    texts = logprobs.get("tokens") or []
    values = logprobs.get("token_logprobs") or [None] * len(texts)
    tops = logprobs.get("top_logprobs") or [None] * len(texts)
    for text, value, top in zip(texts, values, tops, strict=False):
        pairs = [(str(t), float(lp)) for t, lp in (top or {}).items()]
        tokens.add(str(text), value, pairs)


def openai_output(objects: list[Any]) -> Output:
    """An OpenAI completion or chat answer (one body, or every chunk of a stream)."""
    out = Output()
    parts: list[str] = []
    tokens = _Tokens()
    for obj in objects:
        if not isinstance(obj, dict):
            continue
        if obj.get("error"):
            error = obj["error"]
            message = error.get("message", error) if isinstance(error, dict) else error
            out.error = ErrorOutput(200, str(message))
        for choice in obj.get("choices") or []:
            message = choice.get("delta") or choice.get("message") or {}
            text = choice.get("text", message.get("content"))
            if text:
                parts.append(text)
            if choice.get("finish_reason"):
                out.finish_reason = choice["finish_reason"]
            _openai_logprobs(tokens, choice.get("logprobs"))
        usage = obj.get("usage")
        if isinstance(usage, dict):
            out.completion_tokens = usage.get("completion_tokens")
            out.prompt_tokens = usage.get("prompt_tokens")
    out.text = "".join(parts)
    tokens.fill(out)
    return out


def _tgi_top(items: Any) -> list[tuple[str, float]]:
    return [(str(t.get("text", "")), float(t["logprob"])) for t in items or []]


def tgi_output(objects: list[Any]) -> Output:
    """A TGI answer: a ``/generate`` body, or the events of ``/generate_stream``."""
    out = Output()
    tokens = _Tokens()
    streamed: list[str] = []
    final_text: str | None = None
    for item in objects:
        obj = (item[0] if item else {}) if isinstance(item, list) else item  # a list of one
        if not isinstance(obj, dict):
            continue
        if obj.get("error"):
            out.error = ErrorOutput(200, str(obj["error"]))
        token = obj.get("token")
        if isinstance(token, dict):  # a stream event
            tokens.add(
                str(token.get("text", "")), token.get("logprob"), _tgi_top(obj.get("top_tokens"))
            )
            if not token.get("special"):
                streamed.append(str(token.get("text", "")))
        if obj.get("generated_text") is not None:
            final_text = str(obj["generated_text"])
        details = obj.get("details")
        if isinstance(details, dict):
            out.finish_reason = details.get("finish_reason")
            out.completion_tokens = details.get("generated_tokens")
            if details.get("prefill"):
                out.prompt_tokens = len(details["prefill"])
            tops = details.get("top_tokens") or []
            for n, tok in enumerate(details.get("tokens") or []):
                top = _tgi_top(tops[n]) if n < len(tops) else None
                tokens.add(str(tok.get("text", "")), tok.get("logprob"), top)
    out.text = final_text if final_text is not None else "".join(streamed)
    tokens.fill(out)
    return out


def tgis_output(messages: list[Any]) -> Output:
    """A TGIS answer: the one ``GenerationResponse`` of ``Generate``, or every message of
    ``GenerateStream``. Token details are there when the request asked for them (testbed
    asks only together with logprobs); stop reasons take TGI's names."""
    from testbed.clients.tgis import FINISH

    out = Output()
    tokens = _Tokens()
    parts: list[str] = []
    for message in messages:
        if not isinstance(message, dict):
            continue
        parts.append(str(message.get("text") or ""))
        if message.get("input_token_count"):
            out.prompt_tokens = int(message["input_token_count"])
        count = message.get("generated_token_count")
        if count is not None and count >= (out.completion_tokens or 0):
            out.completion_tokens = int(count)
        reason = message.get("stop_reason")
        if reason and reason != "NOT_FINISHED":
            out.finish_reason = FINISH.get(reason, str(reason).lower())
        for token in message.get("tokens") or []:
            top = [(str(t["text"]), float(t["logprob"])) for t in token.get("top_tokens") or []]
            tokens.add(str(token.get("text", "")), token.get("logprob"), top)
    out.text = "".join(parts)
    tokens.fill(out)
    return out
