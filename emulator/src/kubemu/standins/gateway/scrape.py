"""The EPP's view of its pool: every endpoint's ``/metrics`` read every refresh interval.

GAIE's EPP scrapes each model server's Prometheus metrics every ``--refresh-metrics-interval``
(default 50 ms) and schedules on the last values it read; so does the stand-in, with the
vLLM names the EPP maps by default: ``vllm:num_requests_waiting`` (queue),
``vllm:num_requests_running`` and ``vllm:kv_cache_usage_perc`` (``vllm:gpu_cache_usage_perc``
from older vLLM). An endpoint that does not answer keeps its last values.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Callable, Sequence

import aiohttp

from kubemu.standins.gateway.epp import Endpoint

DEFAULT_INTERVAL_S = 0.05
_FIELDS = {
    "vllm:num_requests_waiting": "waiting",
    "vllm:num_requests_running": "running",
    "vllm:kv_cache_usage_perc": "kv_usage",
    "vllm:gpu_cache_usage_perc": "kv_usage",
}
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m)$")


def interval_from_args(args: Sequence[str]) -> float:
    """The EPP's ``--refresh-metrics-interval`` (a Go duration such as ``50ms``), else 50 ms."""
    for i, word in enumerate(args):
        name, has_value, value = word.partition("=")
        if name == "--refresh-metrics-interval":
            text = value if has_value else (args[i + 1] if i + 1 < len(args) else "")
            match = _DURATION.match(text.strip())
            if match:
                number = float(match[1])
                return number / 1e3 if match[2] == "ms" else number * (60 if match[2] == "m" else 1)
    return DEFAULT_INTERVAL_S


def read_metrics(text: str, endpoint: Endpoint) -> None:
    """Set the endpoint's fields from Prometheus text (values summed over label sets)."""
    seen: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith("vllm:"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        field = _FIELDS.get(name)
        if field is None:
            continue
        with contextlib.suppress(ValueError, IndexError):
            seen[field] = seen.get(field, 0.0) + float(line.rsplit(" ", 1)[1])
    for field, value in seen.items():
        setattr(endpoint, field, value)


async def scrape_forever(
    session: aiohttp.ClientSession,
    endpoints: Callable[[], Sequence[Endpoint]],
    interval: Callable[[], float],
) -> None:
    """Until cancelled: read every current endpoint's metrics, then wait an interval."""
    timeout = aiohttp.ClientTimeout(total=1.0)

    async def one(endpoint: Endpoint) -> None:
        with contextlib.suppress(aiohttp.ClientError, TimeoutError, OSError):
            async with session.get(f"http://{endpoint.address}/metrics", timeout=timeout) as r:
                if r.status == 200:
                    read_metrics(await r.text(), endpoint)

    while True:
        current = list(endpoints())
        if current:
            await asyncio.gather(*(one(e) for e in current))
        await asyncio.sleep(interval())
