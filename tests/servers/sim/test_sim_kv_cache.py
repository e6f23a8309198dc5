"""The simulator's KV cache (``servers/sim/kvcache.py``): block accounting, prefix hits, LRU
eviction, and what the server does with it — waiting when the cache is full, the metrics under
vLLM's names — against the rules in docs/simulator.md."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import ValidationError

from testbed.config.sim import SimParams
from testbed.servers.sim import running_sim
from testbed.servers.sim.kvcache import KvCache, block_hashes


def words(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


# -- the block pool, pure -------------------------------------------------------------------
def test_block_hashes_are_chained_and_only_full_blocks() -> None:
    a = block_hashes(words("a", 40), 16, limit=10)
    assert len(a) == 2  # 40 tokens: two full blocks, the partial third is never named
    b = block_hashes(words("a", 32) + words("b", 8), 16, limit=10)
    assert b == a  # the same two leading blocks
    c = block_hashes(["x", *words("a", 31)], 16, limit=10)
    assert c[1] != a[1]  # block 2 has the same tokens as a's block 2 but a different past
    assert block_hashes(words("a", 40), 16, limit=1) == a[:1]


def test_a_second_request_hits_the_prefix_the_first_left() -> None:
    kv = KvCache(capacity_tokens=16 * 10, block_size=16)
    hashes = block_hashes(words("p", 64), 16, limit=(64 - 1) // 16)
    first = kv.allocate(hashes, 64 + 16)
    assert first is not None
    assert first.cached_tokens == 0
    assert kv.free_blocks == 10 - 5
    assert kv.usage == pytest.approx(0.5)
    kv.release(first)
    assert kv.free_blocks == 10
    assert kv.usage == 0.0
    second = kv.allocate(hashes, 64 + 16)
    assert second is not None
    assert second.cached_tokens == 3 * 16


def test_shared_blocks_are_held_once_and_freed_by_the_last_holder() -> None:
    kv = KvCache(capacity_tokens=16 * 10, block_size=16)
    hashes = block_hashes(words("p", 64), 16, limit=3)
    a = kv.allocate(hashes, 64)  # 4 blocks, 3 named
    assert a is not None
    b = kv.allocate(hashes, 64)  # 3 shared + 1 of its own
    assert b is not None
    assert b.cached_tokens == 48
    assert kv.free_blocks == 10 - 4 - 1
    kv.release(a)
    assert kv.free_blocks == 10 - 4  # b still holds the three shared blocks and its own
    kv.release(b)
    assert kv.free_blocks == 10


def test_least_recently_used_prefix_is_evicted_first() -> None:
    kv = KvCache(capacity_tokens=16 * 6, block_size=16)  # room for two 3-block prompts
    old, new, third = (block_hashes(words(p, 48), 16, limit=2) for p in "onz")
    for hashes in (old, new):
        alloc = kv.allocate(hashes, 48)
        assert alloc is not None
        kv.release(alloc)
    alloc = kv.allocate(third, 48)  # needs 3 blocks: 0 never used left, evicts 'old' (LRU)
    assert alloc is not None
    kv.release(alloc)
    hit_new = kv.allocate(new, 48)
    assert hit_new is not None
    assert hit_new.cached_tokens == 32
    kv.release(hit_new)
    hit_old = kv.allocate(old, 48)
    assert hit_old is not None
    assert hit_old.cached_tokens < 32


def test_a_request_that_does_not_fit_changes_nothing() -> None:
    kv = KvCache(capacity_tokens=16 * 4, block_size=16)
    held = kv.allocate([], 48)
    assert held is not None
    assert kv.free_blocks == 1
    assert kv.allocate([], 32) is None
    assert kv.free_blocks == 1


def test_prefix_caching_needs_a_capacity() -> None:
    with pytest.raises(ValidationError, match="prefix_caching needs kv_cache_tokens"):
        SimParams(prefix_caching=True)
    with pytest.raises(ValidationError, match="less than one block"):
        SimParams(kv_cache_tokens=8, block_size=16)


# -- through the server ---------------------------------------------------------------------
async def _call(url: str, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    data = b"" if body is None else json.dumps(body).encode()
    head = (
        f"{method} {path} HTTP/1.1\r\nhost: sim\r\ncontent-length: {len(data)}\r\n"
        "connection: close\r\n\r\n"
    )
    writer.write(head.encode() + data)
    raw = await reader.read()
    writer.close()
    status = int(raw.split(b" ", 2)[1])
    return status, raw.split(b"\r\n\r\n", 1)[1]


def metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in /metrics")


def _prompt(group: str, shared: int, own: str, extra: int) -> str:
    return " ".join(words(group, shared) + words(own, extra))


def test_requests_wait_while_the_kv_cache_is_full_and_metrics_say_so() -> None:
    # 16 blocks of 16 tokens; each request holds ceil((64 + 64) / 16) = 8: two run at once.
    params = SimParams(ttft_ms=150, kv_cache_tokens=256, block_size=16)
    body = {"prompt": " ".join(words("w", 64)), "max_tokens": 64, "ignore_eos": True}

    async def scenario(url: str) -> tuple[str, list[int]]:
        tasks = [asyncio.create_task(_call(url, "POST", "/v1/completions", body)) for _ in range(4)]
        await asyncio.sleep(0.05)  # all four arrived; the first two wait for their first token
        _, during = await _call(url, "GET", "/metrics")
        statuses = [status for status, _ in await asyncio.gather(*tasks)]
        return during.decode(), statuses

    async def main() -> tuple[str, list[int]]:
        async with running_sim(params) as url:
            return await scenario(url)

    during, statuses = asyncio.run(main())
    assert statuses == [200] * 4
    assert metric(during, "vllm:num_requests_running") == 2
    assert metric(during, "vllm:num_requests_waiting") == 2
    assert metric(during, "vllm:kv_cache_usage_perc") == 1.0


def test_prefix_cache_counters_count_tokens_as_vllm_does() -> None:
    params = SimParams(kv_cache_tokens=4096, block_size=16, prefix_caching=True)
    first = {"prompt": _prompt("g", 100, "a", 20), "max_tokens": 4}  # 120 tokens
    second = {"prompt": _prompt("g", 100, "b", 20), "max_tokens": 4}  # shares 100: 6 blocks

    async def scenario(url: str) -> str:
        for body in (first, second):
            status, _ = await _call(url, "POST", "/v1/completions", body)
            assert status == 200
        _, text = await _call(url, "GET", "/metrics")
        return text.decode()

    async def main() -> str:
        async with running_sim(params) as url:
            return await scenario(url)

    text = asyncio.run(main())
    assert "# TYPE vllm:prefix_cache_queries_total counter" in text
    assert metric(text, "vllm:prefix_cache_queries_total") == 240
    assert metric(text, "vllm:prefix_cache_hits_total") == 96  # 6 full blocks of 16
    assert metric(text, "vllm:kv_cache_usage_perc") == 0.0  # nothing running


def test_a_request_larger_than_the_whole_cache_is_refused() -> None:
    params = SimParams(kv_cache_tokens=64, block_size=16)

    async def main() -> tuple[int, bytes]:
        async with running_sim(params) as url:
            body = {"prompt": "a b c", "max_tokens": 80}
            return await _call(url, "POST", "/v1/completions", body)

    status, body = asyncio.run(main())
    assert status == 400
    assert b"kv_cache_tokens" in body
