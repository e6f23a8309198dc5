"""The simulator's gRPC front door (``protocols: [.., tgis]``): the same app behind it as
behind HTTP — admission, queue, faults, metrics — and the CLI flags that open it."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys

import pytest

from testbed.clients import openai, tgis
from testbed.clients.http import ConnectionPool
from testbed.config.sim import SimParams
from testbed.servers.sim.server import SimServer
from testbed.servers.sim.tgis import TgisAnswer, TgisRequest

BODY = {"requests": [{"text": "a b c d"}], "params": {"stopping": {"max_new_tokens": 4}}}


async def _stream(target: str, count: int, timeout_s: float = 5.0) -> list[tgis.TgisSink]:
    pool = tgis.TgisPool(target)
    sinks = [tgis.sink(stream=True) for _ in range(count)]
    try:
        payload = tgis.encode(BODY, stream=True)
        await asyncio.gather(*(pool.send(payload, s, timeout_s) for s in sinks))
    finally:
        await pool.aclose()
    return sinks


async def test_admission_and_metrics_are_shared_with_http() -> None:
    params = SimParams(protocols=("tgis",), itl_ms=20.0, max_concurrency=1, max_waiting=1)
    async with SimServer(params) as server:
        assert server.grpc_target is not None
        sinks = await _stream(server.grpc_target, 3)
        metrics = server.metrics
        statuses = sorted(s.response.status for s in sinks)
        assert statuses == [200, 200, 429]  # one served, one queued, one refused
        assert "queue is full" in str(next(s for s in sinks if not s.response.ok).response.error)
        assert metrics.generation_tokens == 8
        assert metrics.prompt_tokens == 12
        assert metrics.rejected == 1
        assert metrics.running == metrics.waiting == 0


async def test_disconnect_fault_aborts_the_call() -> None:
    params = SimParams(protocols=("tgis",), itl_ms=1.0, faults={"disconnect_rate": 1.0})
    async with SimServer(params) as server:
        assert server.grpc_target is not None
        (sink,) = await _stream(server.grpc_target, 1)
        assert sink.response.status == 503
        assert "dropped" in str(sink.response.error)
        assert server.metrics.aborted == 1


async def test_http_generation_routes_follow_protocols() -> None:
    async with SimServer(SimParams(protocols=("tgis",))) as server:
        pool = ConnectionPool(server.url)
        try:
            refused = await openai.complete(pool, {"prompt": "hi", "max_tokens": 2}, stream=False)
            models = await openai.list_models(pool)
        finally:
            await pool.aclose()
    assert refused.status == 404  # openai is not served …
    assert models == ["sim-model"]  # … but the metadata routes stay


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_cli_serves_grpc_on_the_given_port() -> None:
    port = _free_port()
    argv = [sys.executable, "-m", "testbed", "serve", "sim", "--port", "0",
            "--protocols", "openai,tgi,tgis", "--grpc-port", str(port)]  # fmt: skip
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        first = child.stdout.readline()
        assert first.strip() == f"testbed sim gRPC (tgis) on 127.0.0.1:{port}"
        assert "listening on http://" in child.stdout.readline()
        (sink,) = asyncio.run(_stream(f"127.0.0.1:{port}", 1))
        assert sink.response.ok
        assert sink.response.usage == {"prompt_tokens": 4, "completion_tokens": 4}
    finally:
        child.terminate()
        assert child.wait(timeout=10) == 0
        if child.stdout is not None:
            child.stdout.close()


def test_cli_refuses_grpc_flags_for_vllm() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "testbed", "serve", "vllm", "--protocols", "tgis"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "--protocols and --grpc-port apply to" in done.stderr + done.stdout


@pytest.mark.parametrize("bad", ["openai,grpc", ""])
def test_cli_refuses_unknown_protocols(bad: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "testbed", "serve", "sim", "--port", "0", "--protocols", bad],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "protocols" in done.stderr + done.stdout


class _Call:
    """The door's view of a gRPC call: what it was ended with."""

    open = True

    def __init__(self) -> None:
        self.ended: tuple[str, str] | None = None

    def finish(self, code: str = "OK", message: str = "") -> None:
        self.ended = (code, message)


def _ended(status: int, body: bytes) -> tuple[str, str] | None:
    call = _Call()
    TgisAnswer(call).respond(status, body)  # type: ignore[arg-type]
    return call.ended


def test_a_refusals_grpc_code_is_the_dialects_not_its_wording() -> None:
    # An overload is RESOURCE_EXHAUSTED whatever it says; another refusal keeps its
    # status's code even when its words are an overload's.
    request = TgisRequest.parse(tgis.encode(BODY, stream=False)[5:], SimParams())
    assert _ended(503, request.overloaded("too busy")) == ("RESOURCE_EXHAUSTED", "too busy")
    words = "the waiting queue is full"
    assert _ended(503, TgisRequest.error_body(503, words)) == ("UNAVAILABLE", words)
    assert _ended(400, TgisRequest.error_body(400, words)) == ("INVALID_ARGUMENT", words)
