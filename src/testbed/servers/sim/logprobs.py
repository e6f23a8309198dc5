"""Log-probabilities of the simulator's tokens, in the shapes vLLM and OpenAI return them.

The simulator has no model, so the numbers are made up but deterministic and coherent: the
generated token is the most probable one (the simulator decodes greedily), its log-probability
is the fixed per-id value TGI streams also report (:data:`~testbed.servers.sim.text.LOGPROBS`),
and the ``k - 1`` alternatives are its neighbours in the vocabulary with probabilities
``min(p, 1 - p) / 2**r`` (rank ``r``), so that each list is sorted, below the chosen token and
sums to at most 1. A certain token (``p = 1``) leaves its alternatives at -9999.0, as vLLM
reports an impossible token.

- ``/v1/completions`` (``logprobs: k``): ``{"text_offset", "token_logprobs", "tokens",
  "top_logprobs": [{token: logprob, …}, …]}``; offsets count characters of the completion.
- ``/v1/chat/completions`` (``logprobs: true``, ``top_logprobs: k``): ``{"content": [{"token",
  "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}, …]}, …]}``.
"""

from __future__ import annotations

import math
from typing import Any

from testbed.servers.sim.dialect import BadRequest
from testbed.servers.sim.text import LOGPROBS, VOCABULARY, Generation

#: The most alternatives a request may ask for (vLLM's default ``--max-logprobs``).
MAX_LOGPROBS = 20
#: What vLLM reports for a token that cannot occur.
IMPOSSIBLE = -9999.0


def check_count(value: int | None, key: str) -> int | None:
    """``value`` if it is within the limit, else a 400 naming ``key``."""
    if value is not None and value > MAX_LOGPROBS:
        raise BadRequest(f"'{key}' must be at most {MAX_LOGPROBS}, got {value}", key)
    return value


def ranked(token_id: int, text: str, k: int, vocab: int) -> list[tuple[str, float]]:
    """The generated token (first) and its ``k - 1`` alternatives, most probable first."""
    chosen = LOGPROBS[token_id]
    spare = min(math.exp(chosen), 1.0 - math.exp(chosen))
    out = [(text, chosen)]
    for rank in range(1, min(k, vocab)):
        mass = spare / 2**rank
        value = round(math.log(mass), 4) if mass > 0 else IMPOSSIBLE
        out.append((VOCABULARY[(token_id + rank) % vocab], value))
    return out


def completion_logprobs(
    gen: Generation, k: int, vocab: int, tokens: range, offset: int = 0
) -> dict[str, Any]:
    """The ``logprobs`` object of a completions choice for the generated ``tokens`` (all of
    them in a whole answer, one per stream chunk); ``offset`` is where the first starts."""
    out: dict[str, Any] = {
        "text_offset": [],
        "token_logprobs": [],
        "tokens": [],
        "top_logprobs": [],
    }
    for i in tokens:
        text = gen.texts[i]
        alternatives = ranked(gen.ids[i], text, max(k, 1), vocab)
        out["text_offset"].append(offset)
        out["token_logprobs"].append(alternatives[0][1])
        out["tokens"].append(text)
        out["top_logprobs"].append(dict(alternatives))
        offset += len(text)
    return out


def chat_logprobs(gen: Generation, k: int, vocab: int, tokens: range) -> dict[str, Any]:
    """The ``logprobs`` object of a chat choice (``k`` = ``top_logprobs``, may be 0)."""
    content = []
    for i in tokens:
        text = gen.texts[i]
        alternatives = ranked(gen.ids[i], text, max(k, 1), vocab)
        content.append(
            {
                "token": text,
                "logprob": alternatives[0][1],
                "bytes": list(text.encode()),
                "top_logprobs": [
                    {"token": t, "logprob": lp, "bytes": list(t.encode())}
                    for t, lp in alternatives[:k]
                ],
            }
        )
    return {"content": content}
