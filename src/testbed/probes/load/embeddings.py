"""``api: embeddings`` in the load probe: batches of prompts, what each answer must hold, and
the figures of an embeddings stage.

The dataset's prompts are dealt, in order and cycling, into batches whose sizes are drawn
from ``load.embeddings.batch_size`` (seeded); each batch is one request's ``input`` (an
:class:`~testbed.probes.load.dataset.Item` with ``inputs``; its ``input_tokens`` the sum of
its prompts' tokens, counted by the client). A batch takes its first prompt's row fields
(model, headers, extra_body). ``dimensions`` and ``encoding_format`` ride in each item's
body fields, so every load process sends the same bytes.

An embeddings stage is measured by its end-to-end latency (the answer is one body: no TTFT,
ITL or TPOT) and, beside the requests per second every load has, by ``embeddings``:
``inputs_per_s`` and ``input_tokens_per_s`` (the client's counts, of requests done inside the
window), and ``batch_size`` (the distribution of inputs per request sent in the window).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from testbed.clients.counts import whole_number
from testbed.clients.embeddings import Expect
from testbed.config.embeddings import EmbeddingsLoad
from testbed.probes.load.dataset import Item, draw
from testbed.results import metrics
from testbed.results.metrics import Record


def batched(items: list[Item], settings: EmbeddingsLoad | None, seed: int) -> list[Item]:
    """``items`` dealt into batches: every prompt in at least one, the last batch filled by
    cycling to the start (so each batch has its drawn size)."""
    settings = settings or EmbeddingsLoad()
    if not items:
        return []
    rng = random.Random(f"embeddings-batches-{seed}")
    fields = _body_fields(settings)
    out, at = [], 0
    while at < len(items):
        size = draw(settings.batch_size, rng)
        members = [items[(at + k) % len(items)] for k in range(size)]
        at += size
        first = members[0]
        out.append(
            replace(
                first,
                inputs=tuple(m.prompt for m in members),
                input_tokens=sum(m.input_tokens for m in members),
                output_tokens=0,
                extra_body={**fields, **(first.extra_body or {})} or None,
            )
        )
    return out


def _body_fields(settings: EmbeddingsLoad) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if settings.dimensions is not None:
        fields["dimensions"] = settings.dimensions
    if settings.encoding_format != "float":
        fields["encoding_format"] = settings.encoding_format
    return fields


def expect(item: Item) -> Expect:
    """What the answer to ``item`` must hold: a vector per input, of the length asked."""
    asked = whole_number((item.extra_body or {}).get("dimensions"))
    return Expect(len(item.inputs or (item.prompt,)), asked)


def figures(records: Sequence[Record], win: metrics.Window) -> dict[str, Any]:
    """The ``embeddings`` block of a stage's summary (see the module's docstring)."""
    seconds = win.seconds
    done = [r for r in records if metrics.is_ok(r) and r.get("done_ns") in win]
    sent = [r for r in records if r.get("sent_ns") in win]
    inputs = math.fsum(float(r.get("inputs") or 0) for r in done)
    tokens = math.fsum(float(r.get("input_tokens") or 0) for r in done)
    return {
        "inputs_per_s": inputs / seconds if seconds > 0 else 0.0,
        "input_tokens_per_s": tokens / seconds if seconds > 0 else 0.0,
        "inputs": int(inputs),
        "batch_size": metrics.distribution(float(r.get("inputs") or 0) for r in sent),
    }
