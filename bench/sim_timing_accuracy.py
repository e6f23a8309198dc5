"""How close the simulator's measured TTFT and ITL are to their configured values, under load.

Starts ``testbed serve sim --ttft-ms T --itl-ms I`` and drives it at a constant request rate
with a lean raw-socket client (asyncio.Protocol, one keep-alive connection per in-flight
request), stamping each request when written and each content chunk when read. Reports TTFT
and ITL median / p99 as measured, and TTFT net of the client's own round-trip floor (median of
``/health`` round trips on the same connections). Server CPU per request comes from /proc.

    .venv/bin/python bench/sim_timing_accuracy.py --rate 200 --seconds 5 --ttft-ms 20 --itl-ms 5
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

TICK = os.sysconf("SC_CLK_TCK")


class Stream(asyncio.Protocol):
    def __init__(self, idle: list[Stream]) -> None:
        self.idle, self.buffer, self.arrivals = idle, b"", []  # type: ignore[var-annotated]
        self.sent = 0.0
        self.done: asyncio.Future[tuple[float, list[float]]] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        self.buffer += data
        seen = self.buffer.count(b'"text":')
        self.arrivals.extend([now] * (seen - len(self.arrivals)))
        if self.buffer.endswith((b"\r\n0\r\n\r\n", b"content-length: 0\r\n\r\n")) and self.done:
            self.done.set_result((self.sent, self.arrivals))
            self.idle.append(self)

    def send(self, payload: bytes, done: asyncio.Future[tuple[float, list[float]]]) -> None:
        self.buffer, self.arrivals, self.done = b"", [], done
        self.sent = time.perf_counter()
        self.transport.write(payload)  # type: ignore[attr-defined]


async def drive(
    port: int, rate: float, seconds: float, tokens: int
) -> tuple[list[float], list[Any]]:
    loop = asyncio.get_running_loop()
    body = json.dumps({"prompt": "a b c d", "max_tokens": tokens, "ignore_eos": True,
                       "stream": True}).encode()  # fmt: skip
    payload = b"POST /v1/completions HTTP/1.1\r\ncontent-length: %d\r\n\r\n%b" % (len(body), body)
    idle: list[Stream] = []
    for _ in range(int(rate * 0.5) + 16):
        _, proto = await loop.create_connection(lambda: Stream(idle), "127.0.0.1", port)
        idle.append(proto)
    floor = []
    for _ in range(50):
        fut = loop.create_future()
        idle.pop().send(b"GET /health HTTP/1.1\r\n\r\n", fut)
        await fut
        floor.append(time.perf_counter() - fut.result()[0])
        await asyncio.sleep(0.005)
    futures = []
    start = time.perf_counter()
    for i in range(int(rate * seconds)):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        fut = loop.create_future()
        idle.pop().send(payload, fut)
        futures.append(fut)
    return floor, await asyncio.gather(*futures)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def q(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=200)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--ttft-ms", type=float, default=20)
    parser.add_argument("--itl-ms", type=float, default=5)
    parser.add_argument("--tokens", type=int, default=32)
    args = parser.parse_args()
    cmd = [sys.executable, "-m", "testbed", "serve", "sim", "--port", "0",
           "--ttft-ms", str(args.ttft_ms), "--itl-ms", str(args.itl_ms)]  # fmt: skip
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None
            port = int(proc.stdout.readline().rsplit(":", 1)[1])
            before = cpu_seconds(proc.pid)
            floor, results = asyncio.run(drive(port, args.rate, args.seconds, args.tokens))
            used = cpu_seconds(proc.pid) - before
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(10)
    rtt = statistics.median(floor) * 1e3
    ttft = [(arr[0] - sent) * 1e3 for sent, arr in results]
    itl = [(b - a) * 1e3 for _, arr in results for a, b in itertools.pairwise(arr)]
    print(f"{len(results)} requests at {args.rate:g}/s, {args.tokens} tokens, configured TTFT"
          f" {args.ttft_ms:g} ms, ITL {args.itl_ms:g} ms; load average"
          f" {os.getloadavg()[0]:.2f}")  # fmt: skip
    print(f"client round-trip floor (/health): median {rtt:.3f} ms")
    print(f"TTFT  median {statistics.median(ttft):.3f}  p99 {q(ttft, 0.99):.3f} ms"
          f"  (net of floor: median {statistics.median(ttft) - rtt:.3f},"
          f" p99 {q(ttft, 0.99) - rtt:.3f})")  # fmt: skip
    print(f"ITL   median {statistics.median(itl):.3f}  p99 {q(itl, 0.99):.3f}"
          f"  p1 {q(itl, 0.01):.3f} ms")  # fmt: skip
    print(f"server CPU {used / len(results) * 1e3:.3f} ms per request")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
