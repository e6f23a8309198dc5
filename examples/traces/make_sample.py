"""Writes sample-mooncake.jsonl: a small synthetic trace in Mooncake's format (no download).

Mooncake's published traces (kvcache-ai/Mooncake, FAST'25) are JSON lines of ``timestamp``
(ms since the first request), ``input_length``, ``output_length`` and ``hash_ids`` (the
prompt's 512-token blocks; an id shared by two requests is the same block). This one has
the same shape at a laptop's scale: 300 requests over about 30 s (Poisson, 10/s), every
prompt opening with one of two system prompts (ids 0-1 or 2-3), and a third of requests
continuing an earlier one's context (its blocks, then new ones) — the prefix reuse a
prefix cache feeds on. Seeded: running it again writes the same file.

    python examples/traces/make_sample.py
"""

from __future__ import annotations

import json
import random
from pathlib import Path

BLOCK = 512  # tokens per hash id, as in Mooncake's traces


def rows(seed: int = 37, count: int = 300, rate: float = 10.0) -> list[dict[str, object]]:
    rng = random.Random(seed)
    next_id, t_ms, out = 4, 0.0, []
    earlier: list[list[int]] = []
    for _ in range(count):
        if earlier and rng.random() < 1 / 3:  # a follow-up: an earlier context, then more
            ids = list(rng.choice(earlier))
        else:
            ids = [0, 1] if rng.random() < 0.5 else [2, 3]
        fresh = rng.randint(1, 3)
        ids += range(next_id, next_id + fresh)
        next_id += fresh
        earlier.append(ids)
        tail = rng.randint(1, BLOCK)  # the last block is partial
        out.append(
            {
                "timestamp": round(t_ms),
                "input_length": (len(ids) - 1) * BLOCK + tail,
                "output_length": rng.randint(16, 160),
                "hash_ids": ids,
            }
        )
        t_ms += rng.expovariate(rate) * 1000
    return out


if __name__ == "__main__":
    path = Path(__file__).with_name("sample-mooncake.jsonl")
    path.write_text("".join(json.dumps(r) + "\n" for r in rows()), encoding="utf-8")
    print(f"wrote {path}")
