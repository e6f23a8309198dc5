"""Client-side token counting and exact-length text synthesis.

Three counters, chosen by :func:`counter_for`:

- :class:`HfCounter`: the model's own tokenizer (``tokenizer.json`` in the endpoint's local
  tokenizer folder) through the ``tokenizers`` library — never transformers or torch;
- :class:`RuleCounter`: the simulator's documented rules (``whitespace``: one token per
  word; ``chars4``: one per started group of four characters), picked by asking the
  simulator's ``/tokenize`` how it counts a probe text;
- the ``whitespace`` rule as an *estimate* for any other server (``exact`` is False and the
  summary says so).

``make_text(n, rng)`` returns a text of exactly ``n`` tokens under the counter (synthetic
prompts); ``count(text)`` counts a prompt or an output.
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any, Protocol

from testbed.clients.http import ConnectionPool, ReadTimeout
from testbed.clients.openai import get_json
from testbed.clients.response import BodySinkJson
from testbed.core.errors import InputError

#: Plain lowercase words; any tokenizer splits them predictably.
_WORD_TEXT = (
    "time year people way day man thing woman life child world school state family student"
    " group country problem hand part place case week company system program question work"
    " government number night point home water room mother area money story fact month lot"
    " right study book eye job word business issue side kind head house service friend"
    " father power hour game line end member law car city community name president team"
    " minute idea kid body information back parent face others level office door health"
    " person art war history party result change morning reason research girl guy moment air"
    " teacher force"
)
_WORDS = tuple(_WORD_TEXT.split())


class TokenCounter(Protocol):
    """Counts tokens and synthesises texts of an exact token length."""

    name: str
    exact: bool  # False when the count is only an estimate of the server's

    def count(self, text: str) -> int: ...

    def make_text(self, tokens: int, rng: random.Random) -> str: ...

    def make_texts(self, lengths: list[int], rng: random.Random) -> list[tuple[str, int]]:
        """``make_text`` for many lengths at once (batched where the tokenizer can), with
        each text's measured count (equal to its length but in the rarest cases)."""
        ...

    def count_many(self, texts: list[str]) -> list[int]: ...

    def spec(self) -> dict[str, Any]:
        """What :func:`counter_from_spec` needs to rebuild it in another process."""
        ...


class RuleCounter:
    """The simulator's rules (see :mod:`testbed.config.sim`): ``whitespace`` or ``chars4``."""

    def __init__(self, rule: str = "whitespace", *, exact: bool = True) -> None:
        if rule not in ("whitespace", "chars4"):
            raise InputError(f"unknown token rule {rule!r}; use whitespace or chars4")
        self.rule = rule
        self.exact = exact
        self.name = f"rule:{rule}" if exact else "estimate:whitespace"

    def spec(self) -> dict[str, Any]:
        return {"counter": "rule", "rule": self.rule, "exact": self.exact}

    def count(self, text: str) -> int:
        if self.rule == "whitespace":
            return len(text.split())
        return math.ceil(len(text) / 4)

    def count_many(self, texts: list[str]) -> list[int]:
        return [self.count(text) for text in texts]

    def make_texts(self, lengths: list[int], rng: random.Random) -> list[tuple[str, int]]:
        texts = [self.make_text(n, rng) for n in lengths]
        return list(zip(texts, self.count_many(texts), strict=True))

    def make_text(self, tokens: int, rng: random.Random) -> str:
        if self.rule == "whitespace":
            return " ".join(rng.choice(_WORDS) for _ in range(tokens))
        # chars4: exactly 4 * tokens characters (words padded with spaces, trimmed).
        text = ""
        while len(text) < 4 * tokens:
            text += rng.choice(_WORDS) + " "
        return text[: 4 * tokens - 1] + "."


class HfCounter:
    """A Hugging Face ``tokenizer.json`` loaded with the ``tokenizers`` library."""

    exact = True

    def __init__(self, folder: str) -> None:
        path = Path(folder) / "tokenizer.json"
        if not path.is_file():
            raise InputError(
                f"no tokenizer.json in {folder!r}; point --tokenizer (Endpoint.tokenizer) at"
                " a folder saved with save_pretrained"
            )
        from tokenizers import Tokenizer

        self._tok = Tokenizer.from_file(str(path))
        self.name = f"hf:{Path(folder).name}"
        self._folder = folder
        self._ids: list[int] = []

    def spec(self) -> dict[str, Any]:
        return {"counter": "tokenizer", "dir": self._folder}

    def count(self, text: str) -> int:
        return len(self._tok.encode_batch_fast([text], add_special_tokens=False)[0].ids)

    def count_many(self, texts: list[str]) -> list[int]:
        return [len(e.ids) for e in self._tok.encode_batch_fast(texts, add_special_tokens=False)]

    def make_texts(self, lengths: list[int], rng: random.Random) -> list[tuple[str, int]]:
        """Windows decoded and counted in two batched calls; the few whose edges merged are
        redone one by one."""
        stream = self._stream(max(lengths, default=1))
        starts = [rng.randrange(len(stream) - 2 * n) for n in lengths]
        texts = self._tok.decode_batch(
            [stream[a : a + n] for a, n in zip(starts, lengths, strict=True)]
        )
        counts = self.count_many(texts)
        out = []
        for text, got, n in zip(texts, counts, lengths, strict=True):
            redone = text if got == n else self.make_text(n, rng)
            out.append((redone, got if redone is text else self.count(redone)))
        return out

    def make_text(self, tokens: int, rng: random.Random) -> str:
        """A window of ``tokens`` ids from a long stream of word tokens, decoded, then
        widened or narrowed until re-encoding gives exactly ``tokens`` (a merge across the
        window's edges can change the count by one)."""
        stream = self._stream(tokens)
        start = rng.randrange(len(stream) - 2 * tokens)
        want, text = tokens, ""
        for _ in range(6):
            text = self._tok.decode(stream[start : start + want])
            got = self.count(text)
            if got == tokens:
                return text
            want = max(1, want + tokens - got)
        return text  # the closest found; the record keeps the measured count

    def _stream(self, tokens: int) -> list[int]:
        """Token ids of random words, at least 8× the longest request so far (built once,
        seeded, so prompts stay reproducible)."""
        if len(self._ids) < 8 * tokens + 64:
            words = random.Random(len(self._ids)).choices(_WORDS, k=8 * tokens + 512)
            self._ids = self._tok.encode(" ".join(words), add_special_tokens=False).ids
        return self._ids


def counter_from_spec(spec: dict[str, Any]) -> TokenCounter:
    """The counter described by ``TokenCounter.spec()``."""
    if spec["counter"] == "tokenizer":  # a tokenizer.json folder, not the hf server kind
        return HfCounter(spec["dir"])
    return RuleCounter(spec["rule"], exact=spec["exact"])


async def counter_for(
    tokenizer_dir: str | None, pool: ConnectionPool | None = None
) -> TokenCounter:
    """The best counter available: the local tokenizer folder, else the simulator's rule
    (discovered through ``/tokenize``), else the whitespace estimate."""
    if tokenizer_dir:
        return HfCounter(tokenizer_dir)
    if pool is not None:
        rule = await _sim_rule(pool)
        if rule is not None:
            return RuleCounter(rule)
    return RuleCounter("whitespace", exact=False)


async def _sim_rule(pool: ConnectionPool) -> str | None:
    """Which rule ``/tokenize`` follows, if the server is the simulator (None otherwise)."""
    models = await get_json(pool, "/v1/models")
    data = models.get("data") if isinstance(models, dict) else None
    if not data or not isinstance(data[0], dict) or data[0].get("owned_by") != "testbed-sim":
        return None
    probe = "a b c d e f g h"  # whitespace: 8 tokens; chars4: ceil(15 / 4) = 4
    sink = BodySinkJson(lambda _r, _o, _t: None, keep_raw=True)
    payload = pool.encode("POST", "/tokenize", b'{"prompt":"%s"}' % probe.encode())
    try:
        await pool.send(payload, sink, 10.0)
    except ReadTimeout as exc:
        raise ReadTimeout(f"POST /tokenize: {exc}") from exc
    body = sink.response.raw[0] if sink.response.ok and sink.response.raw else {}
    count = body.get("count") if isinstance(body, dict) else None
    return {8: "whitespace", 4: "chars4"}.get(count) if isinstance(count, int) else None
