"""Server CPU per request: testbed's simulator vs guidellm's mock server, in one run.

Both servers answer at zero configured latency; the same lean asyncio client (below) drives
each at concurrency 32 with a 128-token prompt, 64 streamed output tokens (``ignore_eos``,
``stream_options.include_usage``) on ``/v1/completions``. Server CPU is read from
``/proc/<pid>/stat`` (utime + stime of the server and its descendants) before and after the
measured requests; a warm-up runs first. The machine is shared: figures are noisy, run twice.

guidellm is taken from ``.venv-peers/guidellm`` (``make bench-peers`` installs it); this script
installs nothing. Usage::

    .venv/bin/python bench/sim_vs_guidellm.py [--requests 3000] [--concurrency 32]
    # the simulator's KV cache and prefix caching on (every request hits the same prefix):
    .venv/bin/python bench/sim_vs_guidellm.py --only testbed-sim \
        --sim-set kv_cache_tokens=65536 --sim-set prefix_caching=true
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GUIDELLM = ROOT / ".venv-peers" / "guidellm" / "bin" / "guidellm"
TICK = os.sysconf("SC_CLK_TCK")
PROMPT = " ".join(f"w{i}" for i in range(128))  # 128 whitespace tokens


# -- process CPU from /proc -------------------------------------------------------------------
def _stat(pid: int) -> tuple[int, int]:
    """(ppid, utime+stime ticks) of one process."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), int(fields[11]) + int(fields[12])


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds used so far by ``root`` and every live descendant."""
    table: dict[int, tuple[int, int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                table[int(entry)] = _stat(int(entry))
            except (OSError, ValueError):
                continue
    members, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, _) in table.items():
            if ppid == parent and pid not in members:
                members.add(pid)
                frontier.append(pid)
    return sum(table[p][1] for p in members if p in table) / TICK


# -- the lean client ------------------------------------------------------------------------
def request_bytes(host: str, port: int, model: str) -> bytes:
    import json

    body = json.dumps(
        {
            "model": model,
            "prompt": PROMPT,
            "max_tokens": 64,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    ).encode()
    head = (
        f"POST /v1/completions HTTP/1.1\r\nhost: {host}:{port}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _read_response(reader: asyncio.StreamReader) -> bytes:
    """One response body (chunked or with Content-Length); raises on a server error."""
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    if status != 200:
        raise RuntimeError(f"HTTP {status}")
    lower = head.lower()
    if b"transfer-encoding: chunked" in lower:
        parts: list[bytes] = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            data = await reader.readexactly(size + 2)
            if size == 0:
                return b"".join(parts)
            parts.append(data[:-2])
    length = int(lower.split(b"content-length:")[1].split(b"\r\n")[0])
    return await reader.readexactly(length)


async def drive(
    host: str, port: int, model: str, requests: int, concurrency: int
) -> tuple[float, int]:
    """Send ``requests`` streamed requests over ``concurrency`` keep-alive connections."""
    payload = request_bytes(host, port, model)
    remaining = requests
    tokens = 0

    async def worker() -> None:
        nonlocal remaining, tokens
        reader, writer = await asyncio.open_connection(host, port)
        try:
            while remaining > 0:
                remaining -= 1
                writer.write(payload)
                body = await _read_response(reader)
                if not body.rstrip().endswith(b"data: [DONE]"):
                    raise RuntimeError("stream did not end with [DONE]")
                usage = body.rsplit(b'"completion_tokens":', 1)[1]
                tokens += int(usage.split(b",")[0].split(b"}")[0])
        finally:
            writer.close()

    start = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        for _ in range(concurrency):
            group.create_task(worker())
    return time.perf_counter() - start, tokens


# -- servers ------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} not ready after {timeout}s")


def start_server(kind: str, port: int, sim_sets: list[str]) -> subprocess.Popen[bytes]:
    if kind == "testbed-sim":
        cmd = [sys.executable, "-m", "testbed", "serve", "sim", "--port", str(port)]
        cmd += ["--model", "mock-model"]
        cmd += [part for item in sim_sets for part in ("--set", item)]
    else:
        cmd = [str(GUIDELLM), "mock-server", "--host", "127.0.0.1", "--port", str(port)]
        cmd += ["--ttft-ms", "0", "--itl-ms", "0", "--output-tokens", "64"]
        cmd += ["--model", "mock-model"]
    return subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )


def measure(
    kind: str, requests: int, concurrency: int, warmup: int, sim_sets: list[str]
) -> dict[str, float]:
    port = free_port()
    proc = start_server(kind, port, sim_sets)
    try:
        wait_ready(f"http://127.0.0.1:{port}", proc)
        asyncio.run(drive("127.0.0.1", port, "mock-model", warmup, concurrency))
        before = tree_cpu_seconds(proc.pid)
        elapsed, tokens = asyncio.run(drive("127.0.0.1", port, "mock-model", requests, concurrency))
        used = tree_cpu_seconds(proc.pid) - before
    finally:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
    return {
        "cpu_ms_per_request": used / requests * 1e3,
        "requests_per_s": requests / elapsed,
        "tokens_per_request": tokens / requests,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", choices=("testbed-sim", "guidellm"))
    parser.add_argument(
        "--sim-set", action="append", default=[], help="KEY=VALUE for the simulator (repeatable)"
    )
    args = parser.parse_args()
    kinds = ["testbed-sim", "guidellm"]
    if args.only:
        kinds = [args.only]
    elif not GUIDELLM.exists():
        print(f"{GUIDELLM} is missing (run `make bench-peers`); measuring testbed-sim alone")
        kinds = ["testbed-sim"]
    rounds: dict[str, list[dict[str, float]]] = {k: [] for k in kinds}
    for _ in range(args.rounds):  # alternate servers so background load hits both alike
        for kind in kinds:
            rounds[kind].append(
                measure(kind, args.requests, args.concurrency, args.warmup, args.sim_set)
            )
    results = {
        kind: {key: statistics.median(r[key] for r in runs) for key in runs[0]}
        for kind, runs in rounds.items()
    }
    print(
        f"{args.requests} streamed requests per server and round, {args.rounds} rounds (median"
        f" shown), concurrency {args.concurrency}, 128-token prompt, 64 output tokens;"
        f" simulator settings {args.sim_set or 'default'};"
        f" load average {os.getloadavg()[0]:.2f}"
    )
    for kind, runs in rounds.items():
        each = ", ".join(f"{r['cpu_ms_per_request']:.3f}" for r in runs)
        print(f"  {kind} CPU ms/request per round: {each}")
    print(f"{'server':<14}{'CPU ms/request':>16}{'requests/s':>12}{'tokens/req':>12}")
    for kind, r in results.items():
        print(
            f"{kind:<14}{r['cpu_ms_per_request']:>16.3f}{r['requests_per_s']:>12.0f}"
            f"{r['tokens_per_request']:>12.1f}"
        )
    if len(results) == 2:
        ratio = (
            results["guidellm"]["cpu_ms_per_request"] / results["testbed-sim"]["cpu_ms_per_request"]
        )
        print(f"guidellm mock-server uses {ratio:.1f}x the CPU of testbed-sim per request")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
