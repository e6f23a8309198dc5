"""The simulator's latency formulas with a KV cache, measured from outside over loopback:
cached prompt tokens skip prefill (TTFT), and decode gaps grow with the running batch (ITL).

The simulator runs in its own thread and loop (``serve_in_thread``), the client here stamps
each request when written and each content chunk when read. Medians are judged by their
order-statistic interval from the sample size (tests/sampling.py); the tolerance covers one
loopback round trip and the client's wake-ups on a shared machine.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import statistics
import time

import pytest

from testbed.config.sim import SimParams
from testbed.servers.sim import serve_in_thread
from tests.sampling import median_interval, median_within

pytestmark = pytest.mark.timing

TTFT_MS, PER_TOKEN_MS, BLOCK = 5.0, 0.1, 16


async def _stream(port: int, body: dict[str, object]) -> tuple[float, list[float]]:
    """(TTFT in ms, gaps between content chunks in ms) of one streamed completion."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    data = json.dumps({**body, "stream": True, "ignore_eos": True}).encode()
    head = f"POST /v1/completions HTTP/1.1\r\ncontent-length: {len(data)}\r\n\r\n".encode()
    sent = time.perf_counter()
    writer.write(head + data)
    arrivals: list[float] = []
    buffer = b""
    while not buffer.endswith(b"\r\n0\r\n\r\n"):
        chunk = await reader.read(65536)
        if not chunk:
            break
        now = time.perf_counter()
        buffer += chunk
        arrivals.extend([now] * (buffer.count(b'"text":') - len(arrivals)))
    writer.close()
    gaps = [(b - a) * 1e3 for a, b in itertools.pairwise(arrivals)]
    return (arrivals[0] - sent) * 1e3, gaps


def _words(prefix: str, n: int) -> str:
    return " ".join(f"{prefix}{i}" for i in range(n))


def test_cached_prompt_tokens_skip_prefill() -> None:
    # TTFT = ttft_ms + (prompt - cached) x ttft_per_prompt_token_ms. A 600-token prompt
    # (a 592-token group prefix + 8 own tokens): 65 ms the first time; the second prompt of
    # its group finds 592 // 16 = 37 blocks cached, so 592 tokens skip prefill: 5.8 ms.
    # What a request costs beside the formula (loopback, reading and tokenizing 600 words:
    # ~1 ms here, more on a slower CPU) is the same for both prompts of a group, so the
    # formula is judged by the difference of each pair, and each TTFT by its floor.
    params = SimParams(
        ttft_ms=TTFT_MS,
        ttft_per_prompt_token_ms=PER_TOKEN_MS,
        kv_cache_tokens=1 << 20,
        block_size=BLOCK,
        prefix_caching=True,
    )
    uncached, cached = [], []

    async def measure(port: int) -> None:
        for group in range(40):
            prefix = _words(f"g{group}x", 592)
            for own, out in (("a", uncached), ("b", cached)):
                body = {"prompt": f"{prefix} {_words(own, 8)}", "max_tokens": 2}
                out.append((await _stream(port, body))[0])

    with serve_in_thread(params, port=0) as url:
        asyncio.run(measure(int(url.rsplit(":", 1)[1])))
    saved = [u - c for u, c in zip(uncached, cached, strict=True)]
    summary = (
        f"uncached median {statistics.median(uncached):.2f} ms,"
        f" cached {statistics.median(cached):.2f} ms, saved {statistics.median(saved):.2f} ms"
    )
    assert median_within(saved, 592 * PER_TOKEN_MS, 1.0), summary
    assert median_interval(uncached)[1] >= TTFT_MS + 600 * PER_TOKEN_MS, summary
    assert median_interval(cached)[1] >= TTFT_MS + 8 * PER_TOKEN_MS, summary
    assert median_interval(cached)[0] <= TTFT_MS + 8 * PER_TOKEN_MS + 5.0, summary


def test_decode_gaps_grow_with_the_running_batch() -> None:
    # ITL = itl_ms + (others running) x itl_per_running_ms: 2 ms alone, 2 + 3 x 1.5 = 6.5 ms
    # for each of four streams started together.
    params = SimParams(itl_ms=2.0, itl_per_running_ms=1.5, kv_cache_tokens=1 << 16)
    body = {"prompt": _words("w", 32), "max_tokens": 24}
    alone: list[float] = []
    batched: list[float] = []

    async def measure(port: int) -> None:
        for _ in range(32):
            alone.append(statistics.median((await _stream(port, body))[1]))
        for _ in range(8):
            results = await asyncio.gather(*(_stream(port, body) for _ in range(4)))
            batched.extend(statistics.median(gaps) for _, gaps in results)

    with serve_in_thread(params, port=0) as url:
        asyncio.run(measure(int(url.rsplit(":", 1)[1])))
    summary = (
        f"alone {statistics.median(alone):.2f} ms, batch of 4 {statistics.median(batched):.2f} ms"
    )
    assert median_within(alone, 2.0, 0.3), summary
    assert median_within(batched, 6.5, 0.5), summary
