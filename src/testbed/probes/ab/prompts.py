"""The prompt set of an A/B probe: a JSONL file, or a seeded synthetic set.

A file holds one JSON object a line: ``{"prompt": "..."}`` (completions, TGI) and/or
``{"messages": [{"role": "user", "content": "..."}]}`` (chat), with an optional ``"id"``
(default: ``line-<n>``) and ``"max_tokens"`` (default: the probe's). Blank lines and lines
starting with ``#`` are skipped. The synthetic set is short instructions built from a
seeded word list, each one distinct, so a seed names the whole set.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed.core.errors import InputError

_TOPICS = (
    "rivers",
    "mountains",
    "bridges",
    "harbours",
    "libraries",
    "gardens",
    "railways",
    "lighthouses",
    "markets",
    "deserts",
    "glaciers",
    "islands",
    "forests",
    "volcanoes",
    "canals",
    "orchards",
    "vineyards",
    "observatories",
    "windmills",
    "castles",
    "bakeries",
    "museums",
    "theatres",
    "factories",
    "farms",
    "schools",
    "hospitals",
    "airports",
)
_TASKS = (
    "Describe {a} in one sentence.",
    "Explain how {a} and {b} differ.",
    "List three facts about {a}.",
    "Write a short note comparing {a} with {b}.",
    "Why do people visit {a}? Answer briefly.",
    "Give a one-line definition of {a}.",
)


@dataclass(frozen=True)
class Prompt:
    """One prompt of the set: ``text`` for completions/TGI, ``messages`` for chat (either may
    be derived from the other when only one is given)."""

    id: str
    text: str | None = None
    messages: tuple[dict[str, Any], ...] | None = None
    max_tokens: int | None = None

    def as_text(self) -> str:
        """The prompt as one text (a chat prompt's message contents joined by newlines)."""
        if self.text is not None:
            return self.text
        return "\n".join(str(m.get("content", "")) for m in self.messages or ())

    def as_messages(self) -> list[dict[str, Any]]:
        """The prompt as chat messages (a text becomes one user message)."""
        if self.messages is not None:
            return [dict(m) for m in self.messages]
        return [{"role": "user", "content": self.text or ""}]


def synthetic(count: int, seed: int) -> list[Prompt]:
    """``count`` distinct short instructions, the same for the same ``seed``. (An instruct
    model answers them best through ``api: chat``; over plain completions it often ends at
    once, which leaves those requests without a TTFT.)"""
    rng = random.Random(f"ab-prompts-{seed}")
    prompts: list[Prompt] = []
    seen: set[str] = set()
    while len(prompts) < count:
        a, b = rng.sample(_TOPICS, 2)
        text = rng.choice(_TASKS).format(a=a, b=b)
        if text in seen:  # past the distinct combinations: number the rest
            text = f"{text} (variant {len(prompts)})"
        seen.add(text)
        prompts.append(Prompt(id=f"syn-{len(prompts):04d}", text=text))
    return prompts


def _parse_line(obj: Any, where: str, line: int) -> Prompt:
    if not isinstance(obj, dict):
        raise InputError(f"{where}:{line}: expected a JSON object, got {type(obj).__name__}")
    unknown = set(obj) - {"id", "prompt", "messages", "max_tokens"}
    if unknown:
        raise InputError(
            f"{where}:{line}: unknown key(s) {', '.join(sorted(unknown))};"
            " allowed: id, prompt, messages, max_tokens"
        )
    text, messages = obj.get("prompt"), obj.get("messages")
    if text is None and messages is None:
        raise InputError(f'{where}:{line}: give "prompt" (text) or "messages" (chat), or both')
    if text is not None and not isinstance(text, str):
        raise InputError(f'{where}:{line}: "prompt" must be a string')
    if messages is not None and not (
        isinstance(messages, list) and messages and all(isinstance(m, dict) for m in messages)
    ):
        raise InputError(f'{where}:{line}: "messages" must be a non-empty list of objects')
    max_tokens = obj.get("max_tokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens <= 0):
        raise InputError(f'{where}:{line}: "max_tokens" must be a positive integer')
    return Prompt(
        id=str(obj.get("id", f"line-{line}")),
        text=text,
        messages=tuple(messages) if messages is not None else None,
        max_tokens=max_tokens,
    )


def load(path: Path) -> list[Prompt]:
    """The prompts of a JSONL file; errors name the file, the line and the fix."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(
            f"cannot read the ab prompt file {path}: {exc.strerror or exc}; paths are relative"
            " to the campaign file"
        ) from exc
    prompts: list[Prompt] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}:{number}: not valid JSON ({exc.msg})") from exc
        prompts.append(_parse_line(obj, str(path), number))
    if not prompts:
        raise InputError(f"{path} holds no prompts; write one JSON object a line")
    ids = [p.id for p in prompts]
    if len(set(ids)) != len(ids):
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        raise InputError(f"{path}: duplicate prompt id(s) {', '.join(dupes[:5])}")
    return prompts


def build(file: str | None, count: int, seed: int, base_dir: Path) -> list[Prompt]:
    """The probe's prompt set: ``file`` (relative to ``base_dir``) or ``count`` synthetic."""
    if file is None:
        return synthetic(count, seed)
    path = Path(file)
    return load(path if path.is_absolute() else base_dir / path)
