"""A server's token counts, checked against what the client knows — never taken on its word.

A server reports how many tokens it read and wrote (OpenAI's ``usage``, TGI's
``details.generated_tokens`` and ``prefill``, TGIS's ``generated_token_count`` and
``input_token_count``; the decoders put each in OpenAI's ``usage`` shape). A count that
cannot be true is the server's error of that request, said in words a person can read:

- not a count: not an integer (a string ``"8"``, ``8.0``, ``true``) or negative — vLLM's
  ``UsageInfo`` allows a null ``completion_tokens``, so null is "not given", not an error;
- ``total_tokens`` that is not ``prompt_tokens + completion_tokens`` (its definition);
- more output tokens than the request allowed (:class:`Limits`: ``max_tokens`` — or
  ``max_completion_tokens`` — times ``n`` choices, whose counts ``usage`` sums);
- fewer output tokens than content chunks arrived: every chunk a server streams carries at
  least one new token (vLLM, TGI and TGIS skip a step whose text is empty), as the
  correctness probe's stream check holds too; ``echo`` adds the prompt as one more chunk.

What stays allowed, because a correct server does it: a ``length`` finish with fewer tokens
than ``max_tokens`` (the model's context window ends a request too), a ``stop`` finish at
exactly ``max_tokens`` (the end-of-sequence token came last), and an ``object`` label other
than OpenAI's (many compatible servers name it wrongly; nothing is read from it).

:func:`disagreement` compares a count with the client's own count of the same text (the load
probe counts with the model's tokenizer): re-encoding decoded text can merge or split tokens
at their edges, so only a difference past :data:`TOLERANCE` is the server's error.
"""

from __future__ import annotations

from collections.abc import Sized
from dataclasses import dataclass
from typing import Any, Protocol

#: The usage fields that are token counts.
COUNTS = ("prompt_tokens", "completion_tokens", "total_tokens")
#: How far a server's count may be from the client's count of the same text: re-encoding
#: decoded text can merge or split tokens where two met (random tokens the most), and the
#: server adds special tokens (a BOS) the client's count of the text does not have.
TOLERANCE = 0.25
#: … and at least this many tokens either way (a short answer's one merge is not a lie).
SLACK = 3


@dataclass(frozen=True, slots=True)
class Limits:
    """What a request allowed: ``max_tokens`` output tokens per choice (None: not known),
    ``choices`` (OpenAI's ``n``), ``echo`` (the prompt comes back as content too)."""

    max_tokens: int | None = None
    choices: int = 1
    echo: bool = False

    @property
    def max_output(self) -> int | None:
        """The most output tokens the server's count may add up to."""
        return None if self.max_tokens is None else self.max_tokens * self.choices


NO_LIMITS = Limits()


class Answer(Protocol):
    """What :func:`check` reads of an answer (a ``clients.response.Response`` is one): stated
    here, so that the module below the response does not import it."""

    @property
    def usage(self) -> Any: ...  # the server's usage object as sent (None when not given)
    @property
    def chunks(self) -> Sized: ...  # the content chunks that arrived


def whole_number(value: Any) -> int | None:
    """``value`` when it is an integer count (a bool is not), else None."""
    return value if type(value) is int else None


def token_count(value: Any) -> int | None:
    """``value`` when it can be a count of tokens (a whole number ≥ 0), else None."""
    number = whole_number(value)
    return number if number is not None and number >= 0 else None


def check(response: Answer, limits: Limits = NO_LIMITS) -> str | None:
    """Why the counts of the finished 2xx ``response`` cannot be true (None when they can)."""
    usage = response.usage
    if usage is None:
        return None
    if not isinstance(usage, dict):
        return f"usage is not an object of counts: {str(usage)[:200]}"
    for name in COUNTS:
        value = usage.get(name)
        if value is not None and token_count(value) is None:
            return f"usage.{name} {_shown(value)} is not a count of tokens (a whole number ≥ 0)"
    prompt, out, total = (usage.get(name) for name in COUNTS)
    if prompt is not None and out is not None and total is not None and total != prompt + out:
        return (
            f"usage.total_tokens {total} is not prompt_tokens + completion_tokens"
            f" ({prompt} + {out})"
        )
    if out is None:
        return None
    most = limits.max_output
    if most is not None and out > most:
        asked = f"max_tokens {limits.max_tokens}" + (
            f" × {limits.choices} choices" if limits.choices != 1 else ""
        )
        return f"usage.completion_tokens {out} is over the request's {asked}"
    chunks = len(response.chunks) - (1 if limits.echo else 0)
    if out < chunks:
        return (
            f"usage.completion_tokens {out} is fewer than the {plural(chunks, 'text chunk')}"
            " that arrived (each carries at least one token)"
        )
    return None


def plural(n: int, noun: str) -> str:
    """``1 text chunk``, ``3 text chunks``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def disagreement(server: int, client: int) -> bool:
    """Whether the server's count is farther from the client's exact count of the same
    text than re-tokenisation explains (see :data:`TOLERANCE`)."""
    return abs(server - client) > max(SLACK, TOLERANCE * max(server, client))


def _shown(value: Any) -> str:
    """A bad count as the server wrote it (JSON spelling: ``"8"``, ``true``, ``null``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value[:40]}"'
    return str(value)[:60]
