"""The simulator's latency model: the ground truth that load probes measure against.

Time to first token = ``ttft_ms`` + ``ttft_per_prompt_token_ms`` × prompt tokens to prefill
(those not found in the prefix cache, :mod:`testbed.servers.sim.kvcache`) +
``ttft_per_running_ms`` × other running requests + jitter. Each inter-token gap = ``itl_ms`` +
``itl_per_running_ms`` × other running requests + jitter. Delays are in seconds here (the
event loop's unit) and never negative.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from testbed.config.sim import SimParams


def _jitter_draw(rng: random.Random, distribution: str, scale: float) -> Callable[[], float]:
    """A function returning one jitter sample in seconds (``scale`` is in seconds too)."""
    if scale == 0 or distribution == "fixed":
        return lambda: 0.0
    if distribution == "normal":
        return lambda: rng.gauss(0.0, scale)
    if distribution == "uniform":
        return lambda: rng.uniform(-scale, scale)
    return lambda: rng.expovariate(1.0 / scale)


class LatencyModel:
    """Draws the delays of one simulator; a seeded generator keeps runs reproducible."""

    def __init__(self, params: SimParams) -> None:
        rng = random.Random(params.seed)
        jitter = params.jitter
        self._ttft = params.ttft_ms / 1e3
        self._per_prompt = params.ttft_per_prompt_token_ms / 1e3
        self._ttft_per_running = params.ttft_per_running_ms / 1e3
        self._itl = params.itl_ms / 1e3
        self._itl_per_running = params.itl_per_running_ms / 1e3
        self._ttft_jitter = _jitter_draw(rng, jitter.distribution, jitter.ttft_scale_ms / 1e3)
        self._itl_jitter = _jitter_draw(rng, jitter.distribution, jitter.itl_scale_ms / 1e3)
        #: True when every gap is the same constant: deadlines have a closed form.
        self.constant_itl = self._itl_per_running == 0 and (
            jitter.distribution == "fixed" or jitter.itl_scale_ms == 0
        )

    def ttft(self, prompt_tokens: int, others_running: int) -> float:
        """Seconds from admission to the first token; ``prompt_tokens``: those to prefill."""
        base = (
            self._ttft + self._per_prompt * prompt_tokens + self._ttft_per_running * others_running
        )
        return max(0.0, base + self._ttft_jitter())

    def itl(self, others_running: int) -> float:
        """Seconds between one token and the next."""
        return max(0.0, self._itl + self._itl_per_running * others_running + self._itl_jitter())
