"""Deterministic text for the simulator: the vocabulary, token counting and generation.

The simulator has no model. Generated tokens are drawn from a fixed vocabulary of
consonant-vowel-consonant words, each with one leading space (`` bax``), by a generator seeded
from the simulator's seed, the request's seed and the prompt: the same prompt always gives the
same text, so correctness tests can record goldens against it. Counting rules live in
:mod:`testbed.config.sim`; a generated text of N tokens counts as N under both.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from dataclasses import dataclass

from testbed.config.sim import SimParams

_CONSONANTS = "bcdfghjklmnpqrstvwxyz"
_VOWELS = "aeiou"

#: The whole vocabulary; a simulator uses its first ``vocab_size`` entries.
VOCABULARY: tuple[str, ...] = tuple(
    f" {a}{v}{b}" for a in _CONSONANTS for v in _VOWELS for b in _CONSONANTS
)
#: Each token already JSON-encoded, so streaming never calls json.dumps per token.
VOCABULARY_JSON: tuple[str, ...] = tuple(json.dumps(t) for t in VOCABULARY)
#: A fixed, made-up log-probability per token id (TGI streams report one).
LOGPROBS: tuple[float, ...] = tuple(-round(((i * 37) % 100) / 40.0, 3) for i in range(4096))
_WORD_ID = {t[1:]: i for i, t in enumerate(VOCABULARY)}


def count_tokens(text: str, rule: str) -> int:
    """Tokens in ``text`` under the simulator's counting rule (``whitespace`` or ``chars4``)."""
    if rule == "chars4":
        return -(-len(text) // 4)
    return len(text.split())


def tokenize(text: str, params: SimParams) -> list[int]:
    """Token ids for ``/tokenize``: as many as :func:`count_tokens` counts, stable per piece."""
    if params.tokenizer == "chars4":
        pieces = [text[i : i + 4] for i in range(0, len(text), 4)]
    else:
        pieces = text.split()
    out = []
    for piece in pieces:
        known = _WORD_ID.get(piece.strip())
        if known is not None and known < params.vocab_size:
            out.append(known)
        else:
            out.append(params.vocab_size + zlib.crc32(piece.encode()) % 30000)
    return out


@dataclass(slots=True)
class Generation:
    """One request's output: token ids, their texts and why generation ended."""

    ids: list[int]
    texts: list[str]
    finish_reason: str  # "length", "eos" (a deterministic early stop) or "stop_sequence"

    @property
    def text(self) -> str:
        return "".join(self.texts)


def generate(
    params: SimParams,
    prompt: str,
    *,
    max_tokens: int,
    ignore_eos: bool = False,
    request_seed: int | None = None,
    stop: tuple[str, ...] = (),
    corrupt: bool = False,
) -> Generation:
    """The deterministic output for ``prompt``.

    The early-stop ("eos") draw comes before the token draws, so the output without
    ``ignore_eos`` is always a prefix of the output with it. ``corrupt`` shifts every token to
    its neighbour in the vocabulary: same length, wrong text.
    """
    # One SHAKE-128 stream per (seed, request seed, prompt): 8 bytes for the eos draws, then
    # two bytes per token. Cheaper than seeding a Mersenne Twister on every request.
    key = f"{params.seed}\x00{request_seed}\x00{prompt}".encode()
    stream = hashlib.shake_128(key).digest(8 + 2 * max_tokens)
    length = max_tokens
    finish = "length"
    if params.eos_rate > 0:
        early = int.from_bytes(stream[:4], "little") < params.eos_rate * 2**32
        position = 1 + int.from_bytes(stream[4:8], "little") % max(1, max_tokens - 1)
        if early and not ignore_eos and position < max_tokens:
            length, finish = position, "eos"
    vocab = params.vocab_size
    ids = [v % vocab for v in memoryview(stream[8 : 8 + 2 * length]).cast("H")]
    if corrupt:
        ids = [(i + 1) % vocab for i in ids]
    texts = [VOCABULARY[i] for i in ids]
    gen = Generation(ids, texts, finish)
    if stop:
        _apply_stop(gen, stop)
    return gen


def _apply_stop(gen: Generation, stop: tuple[str, ...]) -> None:
    """Cut the output before the first stop sequence (excluded from the text, as OpenAI does)."""
    full = gen.text
    cut = min((p for p in (full.find(s) for s in stop if s) if p >= 0), default=-1)
    if cut < 0:
        return
    kept_ids: list[int] = []
    kept_texts: list[str] = []
    pos = 0
    for tid, piece in zip(gen.ids, gen.texts, strict=True):
        if pos >= cut:
            break
        kept_ids.append(tid)
        kept_texts.append(piece[: cut - pos])
        pos += len(piece)
    if not kept_ids:  # stopped before any text: one empty token, as a server emits one
        kept_ids, kept_texts = [gen.ids[0]], [""]
    gen.ids, gen.texts, gen.finish_reason = kept_ids, kept_texts, "stop_sequence"
