"""The scraping process: samples every deployment's metrics at a fixed interval.

It runs as its own process (``python -m testbed.probes.server_metrics.sampler SPEC``), so
fetching and parsing a metrics page never takes the GIL or the event loop from the load
generator. It takes a first sample of every target before it says ``ready`` (the baseline
the token counters are measured from), then one every ``interval_s`` on a fixed grid, and
on ``stop`` (or when its standard input closes: the parent died) the final samples: it
scrapes again until the token counters hold still between two scrapes (servers update
them a moment after the response is out), at most :data:`SETTLE_TRIES` times.

Each sample is one JSON line, appended and flushed as it is taken::

    {"deployment", "phase": start|during|final, "sent_ns", "t_ns", "pods", "running",
     "waiting", "kv_cache_usage", "prompt_tokens", "generation_tokens",
     "prefix_cache_queries", "prefix_cache_hits", "error", "sampler_cpu_s"}

and ``not_played`` (a list of pod: flags) when a pod is a stand-in that says it does not play
some of its flags (``testbed_sim:not_played_info``).

A target may name several base URLs: the pods of one deployment, each a process counting
only its own requests. They are scraped together and the sample is the deployment's whole:
counters and queue gauges summed, ``kv_cache_usage`` the pods' mean (every pod its own
cache); when one pod cannot be read the sample is an error (a partial sum is no count).

``sent_ns``/``t_ns`` are ``monotonic_ns`` values (the records' clock: ``CLOCK_MONOTONIC`` is
system-wide on Linux); ``sampler_cpu_s`` is this process's CPU time so far. The spec names
no secret: API keys come in the ``TESTBED_METRICS_KEYS`` environment variable (JSON list).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from testbed.clients.http import ConnectionPool, HttpClientError
from testbed.clients.prometheus import COUNTERS, FIELDS, MetricsError, scrape
from testbed.core.clock import monotonic_ns
from testbed.probes.server_metrics import KEYS_ENV

SETTLE_TRIES = 5
SETTLE_GAP_S = 0.2


class Sampler:
    """Scrapes the spec's targets and appends their samples to the spec's ``out`` file."""

    def __init__(self, spec: dict[str, Any], keys: list[str | None]) -> None:
        self.targets: list[dict[str, Any]] = spec["targets"]
        self.interval_ns = round(float(spec["interval_s"]) * 1e9)
        self.timeout_s = float(spec.get("timeout_s", 5.0))
        self.out = Path(spec["out"])
        self.pools = [
            [
                ConnectionPool(
                    url,
                    headers={"Authorization": f"Bearer {key}"} if key else None,
                    max_connections=1,
                )
                for url in t["base_urls"]
            ]
            for t, key in zip(self.targets, keys, strict=True)
        ]

    async def sample(self, phase: str) -> list[dict[str, Any]]:
        """One sample of every target, written before returning."""
        found = await asyncio.gather(
            *(self._one(t, p, phase) for t, p in zip(self.targets, self.pools, strict=True))
        )
        with self.out.open("ab") as handle:
            handle.write("".join(json.dumps(s) + "\n" for s in found).encode())
        return list(found)

    async def _one(
        self, target: dict[str, Any], pools: list[ConnectionPool], phase: str
    ) -> dict[str, Any]:
        sent = monotonic_ns()
        found = await asyncio.gather(*(self._scrape(pool, target["path"]) for pool in pools))
        urls = target["base_urls"]
        errors = [
            f"pod {n + 1} of {len(urls)} ({url}): {e}" if len(urls) > 1 else e
            for n, (url, (_, _, e)) in enumerate(zip(urls, found, strict=True))
            if e is not None
        ]
        values = merge([v for v, _, _ in found]) if not errors else dict.fromkeys(FIELDS)
        said = [f"pod {n + 1}: {flags}" for n, (_, flags, _) in enumerate(found) if flags]
        return {
            "deployment": target["name"],
            "phase": phase,
            "sent_ns": sent,
            "t_ns": monotonic_ns(),
            "pods": len(pools),
            **values,
            "error": "; ".join(errors) or None,
            "sampler_cpu_s": round(time.process_time(), 6),
            **({"not_played": said} if said else {}),
        }

    async def _scrape(
        self, pool: ConnectionPool, path: str
    ) -> tuple[dict[str, float | None], str | None, str | None]:
        """One pod's values, the flags it says it does not play, or why there are none."""
        try:
            values, flags = await scrape(pool, path, self.timeout_s)
            return values, flags, None
        except (HttpClientError, MetricsError, OSError) as exc:
            return dict.fromkeys(FIELDS), None, str(exc) or type(exc).__name__
        except TimeoutError:
            return dict.fromkeys(FIELDS), None, f"no answer within {self.timeout_s:g} s"

    async def run(self, stop: asyncio.Event) -> None:
        """Sample on a fixed grid from now until ``stop``, then settle."""
        t0 = monotonic_ns()
        tick = 1
        while not stop.is_set():
            delay = (t0 + tick * self.interval_ns - monotonic_ns()) / 1e9
            if delay > 0:
                try:
                    async with asyncio.timeout(delay):
                        await stop.wait()
                    break
                except TimeoutError:
                    pass
            tick = max(tick + 1, (monotonic_ns() - t0) // self.interval_ns + 1)
            await self.sample("during")
        await self.settle()

    async def settle(self) -> None:
        """Final samples until every target's counters are unchanged between two."""
        previous = await self.sample("final")
        for _ in range(SETTLE_TRIES - 1):
            await asyncio.sleep(SETTLE_GAP_S)
            current = await self.sample("final")
            if all(_counters(a) == _counters(b) for a, b in zip(previous, current, strict=True)):
                return
            previous = current

    async def aclose(self) -> None:
        for pools in self.pools:
            for pool in pools:
                await pool.aclose()


def merge(pods: list[dict[str, float | None]]) -> dict[str, float | None]:
    """One deployment's values from its pods': sums, but the mean of ``kv_cache_usage``; a
    field one pod lacks is None (a sum of some pods would pass for the whole)."""
    merged: dict[str, float | None] = {}
    for name in FIELDS:
        values = [pod.get(name) for pod in pods]
        if not values or any(v is None for v in values):
            merged[name] = None
            continue
        total = sum(float(v) for v in values if v is not None)
        merged[name] = total / len(values) if name == "kv_cache_usage" else total
    return merged


def _counters(sample: dict[str, Any]) -> tuple[Any, ...]:
    return (*(sample.get(name) for name in COUNTERS), sample.get("error"))


async def _main(spec: dict[str, Any]) -> None:
    keys = json.loads(os.environ.get(KEYS_ENV) or "null") or [None] * len(spec["targets"])
    sampler = Sampler(spec, keys)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    try:
        await sampler.sample("start")
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        # "stop" or end of input (the parent is gone) both end the sampling.
        waiting = loop.run_in_executor(None, sys.stdin.readline)
        waiting.add_done_callback(lambda _f: stop.set())
        await sampler.run(stop)
    finally:
        await sampler.aclose()


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    asyncio.run(_main(spec))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
