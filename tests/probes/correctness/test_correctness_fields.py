"""Correctness fields that had no test proving they are used (the field audit), against the
in-process simulator: streaming_twins, shuffle and differential_logprobs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from testbed.config.sim import SimParams
from testbed.servers.sim import SimServer
from tests.probes.correctness.test_correctness_sim import probe, sim_params


async def all_records(tmp_path: Path, **config: Any) -> list[dict[str, Any]]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    async with SimServer(sim_params()) as server:
        _, records = await probe(server.url, tmp_path, **config)
    return records


async def records_of(tmp_path: Path, **config: Any) -> list[dict[str, Any]]:
    """The case records that ran, in the order they ended."""
    records = await all_records(tmp_path, **config)
    return [r for r in records if r["kind"] == "case" and r["status"] != "SKIPPED"]


async def test_streaming_twins_can_be_switched_off(tmp_path: Path) -> None:
    with_twins = await records_of(tmp_path / "on", streaming_twins=True)
    without = await records_of(tmp_path / "off", streaming_twins=False)
    assert any(r["stream"] for r in with_twins)
    assert not any(r["stream"] for r in without)
    assert {r["id"] for r in without} == {r["id"] for r in with_twins if not r["stream"]}


async def test_shuffle_changes_the_order_cases_run_in(tmp_path: Path) -> None:
    """One case at a time: unshuffled they run in file order; shuffled (seed 7) they do not."""
    options = {"concurrency": 1, "streaming_twins": False}
    records = await all_records(tmp_path / "a", shuffle=False, **options)
    ordered = [r["id"] for r in records if r["kind"] == "case" and r["status"] != "SKIPPED"]
    shuffled = [r["id"] for r in await records_of(tmp_path / "b", shuffle=True, **options)]
    assert sorted(ordered) == sorted(shuffled)
    assert ordered != shuffled
    file_order = [i for i in records[0]["cases"] if i in ordered]  # the plan record
    assert ordered == file_order


async def test_differential_logprobs_asks_alternatives_of_cases_that_ask_none(
    tmp_path: Path,
) -> None:
    def asked(records: list[dict[str, Any]]) -> Any:
        (case,) = [r for r in records if r["id"] == "stop-sequence/openai"]
        return case["request"].get("logprobs")

    options = {"streaming_twins": False}
    extra = await records_of(tmp_path / "a", reference="sim", differential_logprobs=3, **options)
    none = await records_of(tmp_path / "b", reference="sim", differential_logprobs=0, **options)
    alone = await records_of(tmp_path / "c", differential_logprobs=3, **options)  # no reference
    assert asked(extra) == 3
    (case,) = [r for r in extra if r["id"] == "stop-sequence/openai"]
    assert all(len(top) == 3 for top in case["output"]["top_logprobs"])
    assert asked(none) is None
    assert asked(alone) is None


async def test_concurrency_bounds_the_cases_in_flight(tmp_path: Path) -> None:
    """Every request waits 30 ms for its first token; a sampler in the same loop sees how
    many the server runs at once."""

    async def peak(concurrency: int, out: Path) -> int:
        out.mkdir()
        async with SimServer(SimParams(seed=0, max_model_len=256, ttft_ms=30)) as server:
            seen = [0]

            async def sample() -> None:
                while True:
                    seen[0] = max(seen[0], server.metrics.running)
                    await asyncio.sleep(0.002)

            sampler = asyncio.ensure_future(sample())
            try:
                await probe(server.url, out, concurrency=concurrency, streaming_twins=False)
            finally:
                sampler.cancel()
        return seen[0]

    assert await peak(1, tmp_path / "one") == 1
    assert await peak(4, tmp_path / "four") > 1


async def test_timeout_s_ends_a_slow_case_as_an_error(tmp_path: Path) -> None:
    async with SimServer(SimParams(seed=0, max_model_len=256, ttft_ms=2000)) as server:
        outcome, records = await probe(server.url, tmp_path, timeout_s=0.2, streaming_twins=False)
    cases = [r for r in records if r["kind"] == "case" and r["status"] != "SKIPPED"]
    errored = [r for r in cases if r["status"] == "ERROR"]
    assert len(errored) >= 5
    assert all("tim" in r["reason"].lower() for r in errored), errored[0]["reason"]
    # only the cases that expect an error answer (refused before any token) pass
    passed = {r["case"] for r in cases if r["status"] != "ERROR"}
    assert passed <= {"unknown-model", "too-long-for-context"}, passed
    assert outcome.summary["cases"]["errored"] == len(errored)
