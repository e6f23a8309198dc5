"""Where the streamed figure's CPU goes: the same streams read by ever more of testbed.

``bench/load_cost.py``'s ``stream_cpu_ms_per_request`` (64 tokens, TTFT 20 ms, ITL 5 ms,
concurrency 32: a chunk per token, a read per chunk) split into layers, each measured in
the same process against the same simulator, alternated ``--rounds`` times:

- ``floor``: a bare uvloop protocol that stamps each read and parses nothing (the machine's
  price for the reads and the wake-ups; ``load_cost.py``'s floor);
- ``framing``: testbed's connection pool and HTTP/1.1 framing, every read's timestamp kept
  by a sink that parses nothing more;
- ``sse``: the same with the SSE parser;
- ``client``: the whole client — framing, SSE, JSON, the OpenAI decoder (``openai.sink``);
- ``probe``: the load probe around the client (scheduling, records, the stage's figures).

CPU per request (user and system, ``getrusage``), voluntary context switches per request
(each one a sleep in epoll: a wake-up) and reads per request; a layer's cost is its
difference from the one before it, in the same round.

    PYTHONPATH=src .venv/bin/python bench/stream_cost_parts.py [--requests 1000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import resource
from collections.abc import Callable
from typing import Any

import uvloop

from load_cost import STREAM_BODY, Sim, floor_cost, load, usage_since
from testbed.clients import openai
from testbed.clients.http import ConnectionPool, StatusSink
from testbed.clients.sse import SseParser

WORKERS = 32


class Framing(StatusSink):
    """Keeps each read's timestamp; parses nothing past the HTTP framing."""

    __slots__ = ("stamps",)

    def __init__(self) -> None:
        self.stamps: list[int] = []

    def on_data(self, data: bytes, t_ns: int) -> None:
        self.stamps.append(t_ns)


class Sse(Framing):
    """Splits the body into SSE events, each kept with its read's timestamp."""

    __slots__ = ("events", "sse")

    def __init__(self) -> None:
        super().__init__()
        self.sse = SseParser()
        self.events: list[tuple[int, bytes]] = []

    def on_data(self, data: bytes, t_ns: int) -> None:
        self.stamps.append(t_ns)
        for payload in self.sse.feed(data):
            self.events.append((t_ns, payload))


async def client(url: str, requests: int, make: Callable[[], Any]) -> dict[str, float]:
    pool = ConnectionPool(url)
    payload = openai.encode(pool, "completions", STREAM_BODY, stream=True)
    reads = [0]

    async def worker(n: int) -> None:
        for _ in range(n):
            sink = make()
            await pool.send(payload, sink, 30)
            response = getattr(sink, "response", None)
            if response is not None and not response.ok:
                raise SystemExit(f"a request failed: {response.error}")
            reads[0] += len(getattr(sink, "stamps", ()))

    await asyncio.gather(*(worker(2) for _ in range(WORKERS)))
    reads[0] = 0
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    await asyncio.gather(*(worker(requests // WORKERS) for _ in range(WORKERS)))
    n = requests // WORKERS * WORKERS
    figures = usage_since(r0, n)
    await pool.aclose()
    return figures | {"reads": reads[0] / n if reads[0] else float("nan")}


def probe(sim: Sim, requests: int) -> dict[str, float]:
    """The stage's own figure (process time over the stage); the rest is not split."""
    stage = load(sim, "completions", WORKERS, requests)
    nan = float("nan")
    cpu: float = stage["harness"]["cpu_ms_per_request"]
    return {"cpu": cpu, "user": nan, "sys": nan, "wakeups": nan, "reads": nan}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    sim = Sim(20.0, 5.0)
    layers: dict[str, Callable[[], dict[str, float]]] = {
        "floor": lambda: floor_cost(sim, args.requests, WORKERS),
        "framing": lambda: uvloop.run(client(sim.url, args.requests, Framing)),
        "sse": lambda: uvloop.run(client(sim.url, args.requests, Sse)),
        "client": lambda: uvloop.run(
            client(sim.url, args.requests, lambda: openai.sink(stream=True))
        ),
        "probe": lambda: probe(sim, args.requests),
    }
    try:
        for round_ in range(1, args.rounds + 1):
            print(f"round {round_}")
            print(f"  {'layer':9}{'CPU ms/req':>11}{'+ layer':>9}{'user':>7}{'sys':>7}", end="")
            print(f"{'wake-ups':>10}{'reads':>7}")
            before = None
            for name, measure in layers.items():
                gc.disable()  # as the load probe runs its stages
                try:
                    f = measure()
                finally:
                    gc.enable()
                added = f"{f['cpu'] - before:+9.3f}" if before is not None else f"{'':9}"
                print(f"  {name:9}{f['cpu']:11.3f}{added}{f['user']:7.3f}{f['sys']:7.3f}", end="")
                print(f"{f['wakeups']:10.1f}{f['reads']:7.1f}")
                before = f["cpu"]
    finally:
        sim.close()


if __name__ == "__main__":
    main()
