"""The reference server with an encoder-decoder (bundled:tiny-t5): greedy output alone and in
a batch, and what batching buys.

The server is started by the local backend (float32, one thread, batches of up to 8). Each
prompt is sent alone, one after the other, then all of them at once; the greedy texts and
logprobs must be identical (the script exits 1 otherwise), and the output tokens per second
of both rounds are printed. Each request's decoder step runs as a batch of one (see
``servers/reference/seq2seq.py``), so concurrency overlaps the Python and HTTP work of the
requests but not their matrix products. The machine is shared: read figures as lower bounds.

Usage::

    .venv/bin/python bench/seq2seq_batching.py [--requests 8] [--max-tokens 32]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from testbed.backends.local import LocalBackend
from testbed.config.deployments import deployment_model
from testbed.servers.models import prepare

PROMPTS = [
    "translate English to German: The house is wonderful.",
    "summarize: studies have shown that owning a dog is good for you",
    "Answer the question: what is the capital of France?",
    "Tell me about cats.",
    "The weather today is",
    "Write a long story about the sea.",
    "question: what is two plus two?",
    "The best way to learn Python is",
]


async def complete(host: str, port: int, prompt: str, max_tokens: int) -> dict[str, Any]:
    body = json.dumps({"model": "tiny-t5", "prompt": prompt, "max_tokens": max_tokens,
                       "temperature": 0, "logprobs": 1, "ignore_eos": True}).encode()  # fmt: skip
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        + f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    await writer.drain()
    data = await reader.read()
    writer.close()
    choice = json.loads(data.partition(b"\r\n\r\n")[2])["choices"][0]
    return {"text": choice["text"], "logprobs": choice["logprobs"]["token_logprobs"]}


async def main(requests: int, max_tokens: int) -> int:
    prepare("tiny-t5")
    prompts = (PROMPTS * (1 + requests // len(PROMPTS)))[:requests]
    deployment = deployment_model({"name": "t5", "server": "hf", "model": "bundled:tiny-t5",
                  "params": {"dtype": "float32", "threads": 1, "max_batch_size": 8},
                  "resources": {"cpu": 1}, "startup_timeout_s": 300.0})  # fmt: skip
    with tempfile.TemporaryDirectory() as work:
        backend = LocalBackend(Path(work))
        async with backend.provision("t5", deployment, Path(work) / "t5") as handle:
            host, port = handle.endpoint.base_url.removeprefix("http://").rsplit(":", 1)
            await complete(host, int(port), prompts[0], 4)  # warm-up
            start = time.perf_counter()
            alone = [await complete(host, int(port), p, max_tokens) for p in prompts]
            alone_s = time.perf_counter() - start
            start = time.perf_counter()
            together = await asyncio.gather(
                *(complete(host, int(port), p, max_tokens) for p in prompts)
            )
            together_s = time.perf_counter() - start
    tokens = requests * max_tokens
    print(f"tiny-t5, {requests} requests × {max_tokens} tokens, greedy, float32, 1 thread")
    print(f"  one at a time: {tokens / alone_s:7.1f} output tokens/s ({alone_s:.2f} s)")
    print(f"  all at once:   {tokens / together_s:7.1f} output tokens/s ({together_s:.2f} s)")
    same = list(together) == alone
    print(f"  greedy texts and logprobs identical alone and batched: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=32)
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.requests, args.max_tokens)))
