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

from testbed.clients.http import ConnectionPool
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
        return {"kind": "rule", "rule": self.rule, "exact": self.exact}

    def count(self, text: str) -> int:
        if self.rule == "whitespace":
            return len(text.split())
        return math.ceil(len(text) / 4)

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

    def spec(self) -> dict[str, Any]:
        return {"kind": "hf", "dir": self._folder}

    def count(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def make_text(self, tokens: int, rng: random.Random) -> str:
        """Decode ``tokens`` ids of word text, then trim or extend until re-encoding gives
        exactly ``tokens`` (a merge across a boundary can change the count by one)."""
        words = " ".join(rng.choice(_WORDS) for _ in range(tokens * 2 + 8))
        ids = self._tok.encode(words, add_special_tokens=False).ids
        want = tokens
        text = ""
        for _ in range(8):
            text = self._tok.decode(ids[:want])
            got = self.count(text)
            if got == tokens:
                return text
            want += tokens - got
            if want <= 0 or want > len(ids):
                break
        return text  # the closest found; the record keeps the measured count


def counter_from_spec(spec: dict[str, Any]) -> TokenCounter:
    """The counter described by ``TokenCounter.spec()``."""
    if spec["kind"] == "hf":
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
    await pool.send(pool.encode("POST", "/tokenize", b'{"prompt":"%s"}' % probe.encode()), sink)
    body = sink.response.raw[0] if sink.response.ok and sink.response.raw else {}
    count = body.get("count") if isinstance(body, dict) else None
    return {8: "whitespace", 4: "chars4"}.get(count) if isinstance(count, int) else None
