"""Throughput of testbed's reference server (transformers) beside vLLM, same prompts, same model.

Both servers are started by the local backend with the bundled SmolLM2-135M (float32, one
thread for the reference server; vLLM with --enforce-eager and a 2 GiB KV cache), one after
the other so they never share the two cores. At each concurrency level a lean asyncio client
keeps that many streamed ``/v1/completions`` requests in flight (64 output tokens,
``ignore_eos``, greedy) and reports output tokens per second over the whole level, requests
per second, mean time to first token and mean end-to-end latency. One warm-up request per
server runs first. The machine is shared: run twice and read the figures as lower bounds.

Usage::

    .venv/bin/python bench/reference_vs_vllm.py [--levels 1,8,32] [--max-tokens 64]
        [--servers hf,vllm] [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from testbed.backends.local import LocalBackend
from testbed.config.deployments import deployment_model
from testbed.servers.models import prepare

MODEL = "smollm2-135m"
PROMPTS = [
    "The capital of France is",
    "Write a short story about a robot learning to paint.",
    "def quicksort(items):",
    "Explain why the sky is blue in two sentences.",
    "The three most important inventions of the 20th century are",
    "Once upon a time, in a village by the sea,",
    "List five fruits that are red:",
    "A haiku about autumn leaves:",
    "The difference between a list and a tuple in Python is",
    "In 1969, the first humans",
    "Translate to French: The cat sleeps on the warm windowsill.",
    "Here is a recipe for pancakes:",
    "The main causes of inflation are",
    "Dear hiring manager, I am writing to apply for",
    "SELECT name, age FROM users WHERE",
    "The rules of chess say that a knight moves",
]
DEPLOYMENTS: dict[str, dict[str, Any]] = {
    "hf": {"threads": 1, "max_batch_size": 32, "dtype": "float32"},
    "vllm": {
        "dtype": "float32",
        "max_batch_size": 32,
        "max_model_len": 1024,
        "enforce_eager": True,
        "kv_cache_gb": 2,
    },
}


async def one_request(host: str, port: int, prompt: str, max_tokens: int) -> dict[str, float]:
    """Stream one completion; return its timings and token count (from ``usage``)."""
    body = json.dumps(
        {"model": MODEL, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
         "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
    ).encode()  # fmt: skip
    sent = time.perf_counter()
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    await writer.drain()
    first = 0.0
    tokens = 0
    buffer = b""
    while chunk := await reader.read(65536):
        buffer += chunk
        if not first and b'"text": "' in buffer.replace(b'"text":"', b'"text": "'):
            first = time.perf_counter()
    writer.close()
    done = time.perf_counter()
    for line in buffer.split(b"\n"):
        if line.startswith(b"data: {") and b'"usage"' in line:
            usage = json.loads(line[6:]).get("usage")
            if usage:
                tokens = int(usage["completion_tokens"])
    return {"ttft": (first or done) - sent, "e2e": done - sent, "tokens": tokens}


async def level(host: str, port: int, concurrency: int, requests: int, max_tokens: int) -> Any:
    queue = list(range(requests))
    results: list[dict[str, float]] = []

    async def worker() -> None:
        while queue:
            i = queue.pop()
            results.append(await one_request(host, port, PROMPTS[i % len(PROMPTS)], max_tokens))

    start = time.perf_counter()
    async with asyncio.TaskGroup() as tasks:
        for _ in range(concurrency):
            tasks.create_task(worker())
    wall = time.perf_counter() - start
    tokens = sum(r["tokens"] for r in results)
    return {
        "concurrency": concurrency,
        "requests": len(results),
        "tokens": tokens,
        "wall_s": wall,
        "tokens_per_s": tokens / wall,
        "requests_per_s": len(results) / wall,
        "mean_ttft_s": statistics.fmean(r["ttft"] for r in results),
        "mean_e2e_s": statistics.fmean(r["e2e"] for r in results),
    }


async def bench_server(kind: str, levels: list[int], max_tokens: int, work: Path) -> list[Any]:
    deployment = deployment_model(
        {
            "name": kind,
            "server": kind,
            "model": f"bundled:{MODEL}",
            "params": DEPLOYMENTS[kind],
            "resources": {"cpu": 1},
            "startup_timeout_s": 600.0,
        }
    )
    started = time.perf_counter()
    async with LocalBackend(work).provision(kind, deployment, work / kind) as handle:
        ready = time.perf_counter() - started
        host, port = handle.endpoint.base_url.removeprefix("http://").split(":")
        print(f"{kind}: ready after {ready:.1f} s", file=sys.stderr)
        await one_request(host, int(port), PROMPTS[0], 8)  # warm-up
        rows = []
        for c in levels:
            row = await level(host, int(port), c, max(4, 2 * c), max_tokens)
            row |= {"server": kind, "ready_s": ready}
            print(f"{kind} c={c}: {row['tokens_per_s']:.1f} tokens/s", file=sys.stderr)
            rows.append(row)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    names = ("server", "conc", "reqs", "tokens/s", "req/s", "TTFT s", "e2e s")
    head = "{:<6} {:>4} {:>5} {:>9} {:>6} {:>7} {:>7}".format(*names)
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['server']:<6} {r['concurrency']:>4} {r['requests']:>5} {r['tokens_per_s']:>9.1f}"
            f" {r['requests_per_s']:>6.2f} {r['mean_ttft_s']:>7.2f} {r['mean_e2e_s']:>7.2f}"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--levels", default="1,8,32", help="concurrency levels")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--servers", default="hf,vllm")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    prepare(MODEL)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-ref-vllm-") as tmp:
        for kind in args.servers.split(","):
            rows += asyncio.run(bench_server(kind, levels, args.max_tokens, Path(tmp)))
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
