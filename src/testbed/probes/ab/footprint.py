"""What one A/B comparison asks of this machine, checked before it starts (as the load
probe's :mod:`testbed.probes.load.footprint`): a connection pool per side (``concurrency``
+ 4 each, or 1,024 in open loop), every request's record with its output text until the
comparison, the prompts, and the bootstrap's resample matrix (``bootstrap_resamples`` ×
requests). A section this machine cannot hold is refused at validation, naming the field.
"""

from __future__ import annotations

from testbed.config.ab import AbProbe
from testbed.probes.limits import Excess, Limits, memory_excess
from testbed.probes.load.footprint import IN_FLIGHT_BYTES, PROMPT_TOKEN_BYTES, RESERVED_FILES

RECORD_BYTES = 2048  # one request's record and what the comparison keeps of it
OUTPUT_TOKEN_BYTES = 16  # an output token as text, on each side
PROMPT_TOKENS = 64  # a synthetic prompt's tokens (a prompt file's size is its own)
RESAMPLE_BYTES = 32  # one request in one bootstrap resample: values and indices
OPEN_LOOP_POOL = 1024  # connections per side in open loop (probes/ab/__init__.py)


def excess(config: AbProbe, limits: Limits) -> Excess | None:
    """The first field of ``config`` this machine cannot hold, or None."""
    per_side = OPEN_LOOP_POOL if config.rate is not None else config.concurrency + 4
    needed = 2 * per_side + RESERVED_FILES
    if needed > limits.open_files:
        return Excess(
            "concurrency",
            f"{config.concurrency:,} requests in flight per side need {needed:,} open files,"
            f" but this machine allows {limits.open_files:,} (ulimit -Hn) — lower it to at"
            f" most {(limits.open_files - RESERVED_FILES) // 2 - 4:,}, or raise the limit",
        )
    requests = config.requests * (2 if config.mode == "paired" else 1)
    answer = OUTPUT_TOKEN_BYTES * config.max_tokens
    prompts = config.prompt_count or config.requests
    # a part that grows with two fields names the larger of the two as the one to lower
    outputs = "max_tokens" if config.max_tokens > config.requests else "requests"
    resampled = config.bootstrap_resamples > config.requests
    bootstrap = "bootstrap_resamples" if resampled else "requests"
    parts: list[tuple[str, float, str]] = [
        ("requests", requests * RECORD_BYTES, "records"),
        (outputs, requests * answer, "outputs"),
        ("prompt_count", prompts * PROMPT_TOKENS * PROMPT_TOKEN_BYTES, "synthetic prompts"),
        (
            bootstrap,
            config.bootstrap_resamples * config.requests * RESAMPLE_BYTES,
            "bootstrap resamples",
        ),
        (
            "max_tokens",
            min(per_side, requests) * 2 * (IN_FLIGHT_BYTES + answer),
            "answers in flight",
        ),
    ]
    return memory_excess(parts, limits, "comparison")
