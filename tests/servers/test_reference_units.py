"""Reference server parts without the real model: batch-invariant linears, sampling, the
engine's scheduling (with a fake model), stop strings, metrics and the HTTP layer."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch

from testbed.config.overrides import settings_from
from testbed.core.errors import InputError
from testbed.servers.http1 import Request
from testbed.servers.reference import engine as engine_module
from testbed.servers.reference.engine import Engine, RequestTooLong
from testbed.servers.reference.http import Responder, start
from testbed.servers.reference.invariance import (
    PaddedLinear,
    calibrate_row_multiple,
    row_multiple_for,
)
from testbed.servers.reference.metrics import EngineMetrics
from testbed.servers.reference.model import RowCache
from testbed.servers.reference.sampling import SamplingParams, choose, logprobs_of, new_generator
from testbed.servers.reference.settings import ReferenceSettings

# -- batch-invariant linear layers --------------------------------------------------------


def test_padded_linear_rows_do_not_depend_on_the_batch() -> None:
    torch.manual_seed(0)
    shapes = {(192, 64), (64, 192)}
    multiple = calibrate_row_multiple(shapes, max_rows=12)
    assert 1 <= multiple <= 16
    layer = PaddedLinear(torch.nn.Linear(64, 192, bias=False), multiple)
    x = torch.randn(12, 1, 64)
    alone = [layer(x[i : i + 1]) for i in range(12)]
    for batch in range(2, 13):
        out = layer(x[:batch])
        assert out.shape == (batch, 1, 192)
        for i in range(batch):
            assert torch.equal(out[i : i + 1], alone[i])


def test_row_multiple_is_remembered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "row-multiples.json"
    shapes = {(32, 16)}
    first = row_multiple_for(shapes, 8, torch.float32, store)
    assert list(json.loads(store.read_text()).values()) == [first]
    import testbed.servers.reference.invariance as invariance

    def boom(*_: Any) -> int:
        raise AssertionError("calibrated again")

    monkeypatch.setattr(invariance, "calibrate_row_multiple", boom)
    assert row_multiple_for(shapes, 8, torch.float32, store) == first


def test_row_cache_refuses_to_overflow() -> None:
    cache = RowCache(layers=1, kv_heads=1, head_dim=2, capacity=3)
    cache.length = cache.write(0, torch.ones(1, 1, 2, 2), torch.ones(1, 1, 2, 2))
    assert cache.length == 2
    with pytest.raises(ValueError, match="full"):
        cache.write(0, torch.ones(1, 1, 2, 2), torch.ones(1, 1, 2, 2))


# -- sampling -------------------------------------------------------------------------------


def test_greedy_and_degenerate_sampling_pick_the_arg_max() -> None:
    logits = torch.tensor([0.1, 2.0, 0.5, 1.9])
    g = new_generator(0)
    assert choose(logits, SamplingParams(max_tokens=1), g) == 1
    assert choose(logits, SamplingParams(max_tokens=1, temperature=1.0, top_k=1), g) == 1
    assert choose(logits, SamplingParams(max_tokens=1, temperature=1.0, top_p=0.01), g) == 1


def test_seeded_sampling_repeats_and_stays_in_the_nucleus() -> None:
    logits = torch.tensor([3.0, 2.9, -5.0, -5.0, -5.0])
    params = SamplingParams(max_tokens=1, temperature=1.0, top_p=0.9, seed=7)
    first = [choose(logits, params, g) for g in [new_generator(7)] for _ in range(50)]
    again = [choose(logits, params, g) for g in [new_generator(7)] for _ in range(50)]
    assert first == again
    assert set(first) <= {0, 1}


def test_logprobs_of() -> None:
    logits = torch.tensor([0.0, 1.0, 2.0])
    chosen, top = logprobs_of(logits, 1, 2)
    expected = torch.log_softmax(logits, -1)
    assert chosen == pytest.approx(float(expected[1]))
    assert [i for i, _ in top] == [2, 1]
    assert logprobs_of(logits, 0, 0)[1] == []


# -- stop strings ---------------------------------------------------------------------------


def test_stop_string_holdback() -> None:
    assert engine_module._safe_length("Hello wor", ("world",)) == len("Hello ")
    assert engine_module._safe_length("Hello", ("xyz",)) == 5
    assert engine_module._safe_length("caf\ufffd", ()) == 3  # an incomplete character
    assert engine_module._find_stop("a b. c", (".",), 0) == 3
    assert engine_module._find_stop("a b c", (".",), 0) is None


# -- the engine, with a fake model: token t is followed by t + 1 ------------------------------

VOCAB = 32
EOS = 31


class FakeTokenizer:
    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return "".join(
            " " + chr(97 + i % 26) for i in ids if not (skip_special_tokens and i == EOS)
        )


@dataclass
class FakeModel:
    """Quacks like LoadedModel; records the rows of every decode step."""

    name: str = "fake"
    eos_ids: frozenset[int] = frozenset({EOS})
    tokenizer: FakeTokenizer = field(default_factory=FakeTokenizer)
    steps: list[int] = field(default_factory=list)
    gate: threading.Semaphore | None = None  # when set, each decode step takes one permit

    def new_cache(self, capacity: int) -> RowCache:
        return RowCache(1, 1, 1, capacity)

    @staticmethod
    def _logits(last: int) -> torch.Tensor:
        return torch.nn.functional.one_hot(torch.tensor((last + 1) % VOCAB), VOCAB).float() * 10

    def prefill(self, ids: list[int], cache: RowCache) -> torch.Tensor:
        if ids[0] == 13:
            raise MemoryError("prompts starting with 13 are cursed")
        cache.length = len(ids)
        return self._logits(ids[-1])

    def decode(self, tokens: list[int], caches: list[RowCache]) -> torch.Tensor:
        if self.gate is not None:
            assert self.gate.acquire(timeout=30)
        self.steps.append(len(tokens))
        for cache in caches:
            cache.length += 1
        return torch.stack([self._logits(t) for t in tokens])


async def run_engine(model: FakeModel, body: Any) -> Any:
    engine = Engine(model, max_batch=4, max_len=64, threads=1)  # type: ignore[arg-type]
    async with asyncio.TaskGroup() as tasks:
        tasks.create_task(engine.run())
        try:
            return await body(engine)
        finally:
            engine.stop()


async def collect(engine: Engine, prompt: list[int], **fields: Any) -> list[Any]:
    return [s async for s in engine.generate(prompt, SamplingParams(**fields))]


async def test_engine_batches_concurrent_requests() -> None:
    model = FakeModel()

    async def body(engine: Engine) -> list[list[Any]]:
        return list(await asyncio.gather(*(collect(engine, [i], max_tokens=6) for i in range(3))))

    results = await run_engine(model, body)
    for first, steps in enumerate(results):
        assert [s.token.id for s in steps] == [first + k for k in range(1, 7)]
        assert steps[-1].finish_reason == "length"
        assert "".join(s.text for s in steps) == "".join(
            " " + chr(97 + first + k) for k in range(1, 7)
        )
    assert max(model.steps) > 1  # rows were decoded together


async def test_engine_stops_at_eos_and_stop_strings() -> None:
    async def body(engine: Engine) -> tuple[list[Any], list[Any]]:
        eos = await collect(engine, [27], max_tokens=10)
        stop = await collect(engine, [0], max_tokens=10, stop=(" d",))
        return eos, stop

    eos, stop = await run_engine(FakeModel(), body)
    assert [s.token.id for s in eos] == [28, 29, 30, 31]
    assert (eos[-1].finish_reason, eos[-1].stop_kind) == ("stop", "eos_token")
    assert "".join(s.text for s in stop) == " b c"
    assert (stop[-1].finish_reason, stop[-1].stop_kind) == ("stop", "stop_sequence")


async def test_an_abandoned_request_leaves_the_batch() -> None:
    model = FakeModel(gate=threading.Semaphore(0))

    async def body(engine: Engine) -> int:
        async with aclosing(engine.generate([0], SamplingParams(max_tokens=50))) as steps:
            await anext(steps)  # the prefill's token
            model.gate.release()  # type: ignore[union-attr]
            await anext(steps)  # one decode step
        # The client went away. The worker may be blocked in one more step; let it finish.
        model.gate.release(100)  # type: ignore[union-attr]
        deadline = time.monotonic() + 10
        # The worker thread owns this state and signals nothing: poll it, with a deadline.
        while engine.metrics.running and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.005)
        return engine.metrics.running

    assert await run_engine(model, body) == 0
    assert len(model.steps) <= 2  # not the 49 decode steps a finished request needs


async def test_a_failing_prefill_fails_only_its_request() -> None:
    async def body(engine: Engine) -> list[list[Any]]:
        return list(
            await asyncio.gather(
                collect(engine, [13], max_tokens=3), collect(engine, [1], max_tokens=3)
            )
        )

    cursed, fine = await run_engine(FakeModel(), body)
    assert cursed[-1].finish_reason == "error"
    assert "cursed" in cursed[-1].error
    assert [s.token.id for s in fine] == [2, 3, 4]


async def test_engine_refuses_requests_longer_than_the_context() -> None:
    async def body(engine: Engine) -> None:
        with pytest.raises(RequestTooLong, match="maximum context length is 64"):
            await collect(engine, list(range(60)), max_tokens=10)

    await run_engine(FakeModel(), body)


# -- metrics, settings, HTTP -----------------------------------------------------------------


def test_metrics_render_vllm_names_with_cumulative_buckets() -> None:
    metrics = EngineMetrics("m")
    metrics.observe_first_token(30_000_000)
    metrics.observe_first_token(2_000_000_000)
    text = metrics.render()
    assert 'vllm:time_to_first_token_seconds_bucket{model_name="m",le="0.04"} 1' in text
    assert 'vllm:time_to_first_token_seconds_bucket{model_name="m",le="+Inf"} 2' in text
    assert 'vllm:time_to_first_token_seconds_count{model_name="m"} 2' in text


def test_settings_from_set_and_flags() -> None:
    def settings(sets: list[str], threads: int | None = None) -> ReferenceSettings:
        flags = {"threads": ("--threads", threads)}
        return settings_from(ReferenceSettings, sets, flags, what="hf server setting", example="")

    chosen = settings(["max_batch_size=16", "batch_invariant=false", "threads=4"], threads=2)
    assert (chosen.max_batch_size, chosen.batch_invariant, chosen.threads) == (16, False, 2)
    with pytest.raises(InputError, match="KEY=VALUE"):
        settings(["threads"])
    with pytest.raises(InputError, match="invalid hf server setting — --set threads: "):
        settings(["threads=0"])


async def test_a_client_that_leaves_ends_its_generation_at_the_next_step() -> None:
    """Through the HTTP door: the client of a whole (unstreamed) answer closes its connection
    while the engine generates; the request leaves the batch at the next decode step instead
    of being decoded to its max_tokens (tests/servers/reference/test_http.py: the door)."""
    model = FakeModel(gate=threading.Semaphore(0))
    first_token, gone = asyncio.Event(), asyncio.Event()

    async def body(engine: Engine) -> list[Any]:
        async def complete(request: Request, out: Responder) -> None:
            try:
                async with aclosing(engine.generate([0], SamplingParams(max_tokens=50))) as steps:
                    async for _step in steps:
                        first_token.set()
            except asyncio.CancelledError:
                gone.set()
                raise
            out.send_json(200, {})

        door = await start(complete, "127.0.0.1", 0)
        try:
            _reader, writer = await asyncio.open_connection("127.0.0.1", door.port)
            writer.write(b"POST /v1/completions HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
            async with asyncio.timeout(10):
                await first_token.wait()  # prefilled; its first decode step waits on the gate
                writer.close()
                await writer.wait_closed()
                await gone.wait()
            model.gate.release(100)  # type: ignore[union-attr]
            return await collect(engine, [5], max_tokens=4)
        finally:
            await door.close()

    alone = await run_engine(model, body)
    assert [s.token.id for s in alone] == [6, 7, 8, 9]
    # the step the leaver was in when it left, then the second request's three, each alone
    assert model.steps == [1, 1, 1, 1]
