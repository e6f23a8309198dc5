"""A deployment served by several pods (issue 32): every pod is read, the sample is the sum.

Each pod is a process that counts only its own tokens; reading one of two pods (or the
Service, which hands each scrape to any one) showed "server counted 320 output tokens, the
client 640 (50.0 % apart)" on every treatment. Here each pod is a static metrics page whose
numbers the test sets, so the sums are known exactly.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from testbed.clients.endpoint import Endpoint
from testbed.config.server_metrics import ServerMetrics
from testbed.probes.server_metrics import SAMPLES_FILE, sampling
from testbed.probes.server_metrics.sampler import Sampler
from testbed.probes.server_metrics.summary import ClientTokens, read_samples, summarise


class Page:
    """One pod's metrics page; ``values`` may change between scrapes."""

    def __init__(self, generated: int, prompt: int, running: int, kv: float) -> None:
        self.values = {"generated": generated, "prompt": prompt, "running": running, "kv": kv}

    def text(self) -> bytes:
        v = self.values
        return (
            f'vllm:generation_tokens_total{{model_name="m"}} {v["generated"]}\n'
            f'vllm:prompt_tokens_total{{model_name="m"}} {v["prompt"]}\n'
            f'vllm:num_requests_running{{model_name="m"}} {v["running"]}\n'
            f'vllm:num_requests_waiting{{model_name="m"}} 0\n'
            f'vllm:kv_cache_usage_perc{{model_name="m"}} {v["kv"]}\n'
        ).encode()


@contextlib.asynccontextmanager
async def serving(*pages: Page) -> AsyncIterator[list[str]]:
    """Each page on a port of its own (its URL)."""

    def handler(page: Page) -> Any:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while await reader.readuntil(b"\r\n\r\n"):
                body = page.text()
                head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                writer.write(head + body)
                await writer.drain()

        async def guarded(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
                await handle(reader, writer)
            writer.close()

        return guarded

    servers = [await asyncio.start_server(handler(p), "127.0.0.1", 0) for p in pages]
    try:
        yield [f"http://127.0.0.1:{s.sockets[0].getsockname()[1]}" for s in servers]
    finally:
        for server in servers:
            server.close()
            await server.wait_closed()


def spec(tmp_path: Path, urls: list[str]) -> dict[str, Any]:
    target = {"name": "stack", "base_urls": urls, "path": "/metrics"}
    return {"targets": [target], "interval_s": 0.1, "out": str(tmp_path / SAMPLES_FILE)}


async def test_every_pod_is_read_and_the_sample_is_their_sum(tmp_path: Path) -> None:
    async with serving(Page(100, 40, 2, 0.5), Page(220, 60, 1, 0.1)) as urls:
        sampler = Sampler(spec(tmp_path, urls), [None])
        try:
            (sample,) = await sampler.sample("during")
        finally:
            await sampler.aclose()
    assert sample["error"] is None
    assert sample["pods"] == 2
    assert (sample["generation_tokens"], sample["prompt_tokens"], sample["running"]) == (
        320.0,
        100.0,
        3.0,
    )
    assert abs(sample["kv_cache_usage"] - 0.3) < 1e-9  # each pod its own cache: the mean


async def test_a_pod_that_cannot_be_read_makes_the_sample_an_error(tmp_path: Path) -> None:
    async with serving(Page(100, 40, 2, 0.5)) as urls:
        async with serving(Page(1, 1, 1, 0.1)) as gone:
            pass  # its port is closed now
        sampler = Sampler(spec(tmp_path, [*urls, *gone]), [None])
        try:
            (sample,) = await sampler.sample("during")
        finally:
            await sampler.aclose()
    assert sample["error"] is not None
    assert sample["error"].startswith(f"pod 2 of 2 ({gone[0]}): ")
    assert sample["generation_tokens"] is None  # one pod's count is not the deployment's


async def test_the_session_sums_the_pods_and_a_true_mismatch_still_warns(tmp_path: Path) -> None:
    one, two = Page(0, 0, 0, 0.0), Page(0, 0, 0, 0.0)
    async with serving(one, two) as urls:
        endpoint = Endpoint("http://127.0.0.1:9", metrics_urls=tuple(urls))
        settings = ServerMetrics(interval_s=0.1)
        async with sampling(tmp_path, {"stack": endpoint}, settings) as session:
            assert session.active, session.problems
            one.values["generated"], two.values["generated"] = 320, 320  # the load, spread
    samples = read_samples(tmp_path / SAMPLES_FILE)
    assert {s["pods"] for s in samples} == {2}
    agreed = summarise(samples, {"stack": ClientTokens(640, None)}, settings)
    assert agreed["deployments"]["stack"]["generation_tokens"] == 640.0
    assert agreed["flagged"] == []
    short = summarise(samples, {"stack": ClientTokens(900, None)}, settings)
    assert short["flagged"] == [
        "stack: server counted 640 output tokens, the client 900 (28.9% apart, above 2.0%)"
    ]
