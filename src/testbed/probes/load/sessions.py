"""Multi-turn sessions: the conversations a ``kind: sessions`` dataset describes.

A :class:`Conversation` is the user's side of a session: each :class:`Turn` is a new user
message (its text and tokens) and the output length to ask for it. What the server
answered is not known until the load runs: :mod:`testbed.probes.load.session_runner`
grows each session's history with the real answers.

Conversations come from a ShareGPT file — *every* human turn of a conversation, each
answered by the model turn after it (its length is the output to ask for) — or are
generated: ``turns`` per session, ``input_tokens`` new tokens and ``output_tokens`` asked
per turn, drawn with the seed (the same seed gives the same conversations).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed.config.workload import SessionDataset
from testbed.core.errors import InputError
from testbed.probes.load.dataset import draw, read_rows
from testbed.probes.load.tokens import TokenCounter

_DEFAULT_OUTPUT = 64  # tokens, when a conversation's user turn has no model reply after it
_MODEL_ROLES = ("gpt", "assistant", "model", "chatgpt", "bard")  # ShareGPT's and OpenAI's


@dataclass(frozen=True, slots=True)
class Turn:
    """One user message of a session and the output length asked for its answer."""

    text: str
    tokens: int  # the message's own tokens (client-counted), history not included
    output_tokens: int


@dataclass(frozen=True, slots=True)
class Conversation:
    """A session's user turns, in order, and the pause before each turn after the first."""

    turns: tuple[Turn, ...]
    think_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """What a load child process rebuilds it from (:meth:`from_json`)."""
        return {
            "turns": [[t.text, t.tokens, t.output_tokens] for t in self.turns],
            "think_s": self.think_s,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Conversation:
        return cls(tuple(Turn(*t) for t in data["turns"]), data["think_s"])


def build(
    ds: SessionDataset, counter: TokenCounter, seed: int, base_dir: Path
) -> list[Conversation]:
    """The conversations of ``ds`` (deterministic for a seed and counter); a file's relative
    path starts at ``base_dir``."""
    rng = random.Random(seed)
    if ds.path is None:
        return _generated(ds, counter, rng)
    return _from_file(ds, counter, rng, base_dir)


def _generated(ds: SessionDataset, counter: TokenCounter, rng: random.Random) -> list[Conversation]:
    shapes: list[list[tuple[int, int]]] = []
    for _ in range(ds.sessions):
        count = draw(ds.turns, rng)
        shapes.append(
            [(draw(ds.input_tokens, rng), draw(ds.output_tokens, rng)) for _ in range(count)]
        )
    texts = iter(counter.make_texts([n for shape in shapes for n, _ in shape], rng))
    out = []
    for shape in shapes:
        turns = []
        for _, n_out in shape:
            text, tokens = next(texts)
            turns.append(Turn(text, tokens, n_out))
        out.append(Conversation(tuple(turns), ds.think_time_s))
    return out


def _from_file(
    ds: SessionDataset, counter: TokenCounter, rng: random.Random, base_dir: Path
) -> list[Conversation]:
    assert ds.path is not None
    path = base_dir / ds.path
    if not path.is_file():
        what = "is a directory, not a file" if path.is_dir() else "does not exist"
        raise InputError(f"dataset.path: sessions file {str(path)!r} {what}")
    dialogues = [d for d in (_dialogue(row) for row in read_rows(path)) if d]
    if ds.shuffle:
        rng.shuffle(dialogues)
    if ds.limit is not None:
        dialogues = dialogues[: ds.limit]
    if not dialogues:
        raise InputError(
            f"dataset.path: {ds.path!r} has no conversation that starts with a human turn"
            " (ShareGPT: conversations of {from: human|gpt, value}, or messages of"
            " {role: user|assistant, content})"
        )
    out = []
    for dialogue in dialogues:
        turns = []
        for text, reply in dialogue:
            n_out = max(1, counter.count(reply)) if reply else _DEFAULT_OUTPUT
            turns.append(Turn(text, counter.count(text), n_out))
        out.append(Conversation(tuple(turns), ds.think_time_s))
    return out


def _dialogue(row: Any) -> list[tuple[str, str | None]]:
    """Every (human message, model reply) pair of a ShareGPT row, in order; a system turn
    is skipped, a conversation must start with a human turn. Two human turns in a row are
    two turns (the first with no known reply)."""
    turns = row.get("conversations") or row.get("messages") if isinstance(row, dict) else None
    if not isinstance(turns, list):
        return []
    pairs: list[tuple[str, str | None]] = []
    for turn in turns:
        if not isinstance(turn, dict):
            continue
        role, text = turn.get("from", turn.get("role")), turn.get("value", turn.get("content"))
        if not isinstance(text, str):
            continue
        if role in ("human", "user"):
            pairs.append((text, None))
        elif role in _MODEL_ROLES and pairs and pairs[-1][1] is None:
            pairs[-1] = (pairs[-1][0], text)
    return pairs
