"""Where two answers part: the first divergent token, and whether it was a near-tie.

With token texts on both sides the comparison is per token; otherwise per character. Where
a side has its top alternatives (logprobs) at the divergent position, the *margin* is how
far apart the two competing tokens were in that side's distribution:

- both tokens are among the listed alternatives: ``|logprob(a) - logprob(b)|`` (for greedy
  decoding at the first divergence this is the gap between the top two candidates);
- the other token is not listed: at least ``logprob(top) - logprob(last listed)`` — a lower
  bound, so a margin above the threshold is a real difference either way.

The smallest margin over the sides that have one is reported; a greedy divergence whose
margin is at most ``near_tie_nats`` is a *near-tie* (numerical noise: the model hesitated
between two tokens), anything else a real difference. Sampled cases are not classified.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from testbed.probes.correctness.outputs import Output, TopList

CONTEXT_CHARS = 60
CONTINUATION_CHARS = 160


@dataclass
class FirstDivergence:
    """The first place two answers differ."""

    index: int  # token index (unit "token") or character index (unit "char")
    unit: Literal["token", "char"]
    expected_token: str | None  # None: that answer ended here
    actual_token: str | None
    common_prefix: str  # the end of the shared text, for context
    expected_continuation: str
    actual_continuation: str
    margin_nats: float | None = None
    margin_expected: float | None = None  # in the expected (reference) distribution
    margin_actual: float | None = None
    near_tie: bool | None = None  # None: not classifiable (no logprobs, or sampled)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _gap(row: list[tuple[str, float]] | None, mine: str | None, other: str | None) -> float | None:
    """The margin in one distribution (see the module docstring)."""
    if not row or mine is None or other is None:
        return None
    values = dict(reversed(row))  # the first (most likely) entry wins for repeated texts
    if mine in values and other in values:
        return abs(values[mine] - values[other])
    if len(row) >= 2:
        return row[0][1] - row[-1][1]
    return None


def _row(top: TopList | None, index: int) -> list[tuple[str, float]] | None:
    return top[index] if top is not None and index < len(top) else None


def _token_divergence(
    expected: Output, actual: Output, a: list[str], b: list[str]
) -> FirstDivergence | None:
    index = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
    if index is None:
        if len(a) == len(b):
            return None
        index = min(len(a), len(b))
    exp_tok = a[index] if index < len(a) else None
    act_tok = b[index] if index < len(b) else None
    margin_e = _gap(_row(expected.top_logprobs, index), exp_tok, act_tok)
    margin_a = _gap(_row(actual.top_logprobs, index), act_tok, exp_tok)
    prefix = "".join(a[:index])
    return FirstDivergence(
        index=index,
        unit="token",
        expected_token=exp_tok,
        actual_token=act_tok,
        common_prefix=prefix[-CONTEXT_CHARS:],
        expected_continuation="".join(a[index:])[:CONTINUATION_CHARS],
        actual_continuation="".join(b[index:])[:CONTINUATION_CHARS],
        margin_expected=margin_e,
        margin_actual=margin_a,
    )


def _char_divergence(a: str, b: str) -> FirstDivergence | None:
    if a == b:
        return None
    pairs = enumerate(zip(a, b, strict=False))
    index = next((i for i, (x, y) in pairs if x != y), min(len(a), len(b)))
    return FirstDivergence(
        index=index,
        unit="char",
        expected_token=a[index] if index < len(a) else None,
        actual_token=b[index] if index < len(b) else None,
        common_prefix=a[:index][-CONTEXT_CHARS:],
        expected_continuation=a[index:][:CONTINUATION_CHARS],
        actual_continuation=b[index:][:CONTINUATION_CHARS],
    )


def first_divergence(
    expected: Output, actual: Output, near_tie_nats: float, *, greedy: bool = True
) -> FirstDivergence | None:
    """The first divergence of ``actual`` from ``expected``, or None when their texts (and
    token texts, where both have them) agree."""
    a, b = expected.token_texts, actual.token_texts
    found = None
    if a is not None and b is not None:
        found = _token_divergence(expected, actual, a, b)
        if found is None and expected.text != actual.text:
            found = _char_divergence(expected.text, actual.text)
    else:
        found = _char_divergence(expected.text, actual.text)
    if found is None:
        return None
    margins = [m for m in (found.margin_expected, found.margin_actual) if m is not None]
    if margins:
        found.margin_nats = min(margins)
        found.near_tie = found.margin_nats <= near_tie_nats if greedy else None
    return found
