"""The probe end to end against the simulator: goldens pass, corrupted answers FAIL, a
server that goes away mid-run gives ERROR (never FAIL), the run seed is recorded, and
``testbed record`` writes goldens that then pass."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import signal
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed.clients.endpoint import Endpoint
from testbed.config.correctness import CorrectnessProbe
from testbed.config.loader import load_campaign_text
from testbed.config.sim import SimParams
from testbed.core.clock import monotonic_ns
from testbed.execution.pipeline import execute, open_new
from testbed.execution.run import RunOptions
from testbed.probes.base import ProbeContext, ProbeOutcome
from testbed.probes.correctness import run
from testbed.probes.correctness.goldens import generate_file, write
from testbed.results.files import RecordWriter, read_records
from testbed.results.verdict import Status
from testbed.servers.sim import SimServer

EXAMPLES = Path(__file__).parents[3] / "examples"
SIM_CASES = EXAMPLES / "cases" / "sim.yaml"
DEPLOYMENT = {"name": "sim", "server": "sim", "params": {"dtype": "float32", "seed": 0}}


def sim_params(**faults: float) -> SimParams:
    return SimParams(seed=0, max_model_len=256, faults=faults)


async def probe(
    url: str,
    tmp_path: Path,
    cases: Path = SIM_CASES,
    progress: Callable[[str], None] = lambda _m: None,
    **config: Any,
) -> tuple[ProbeOutcome, list[dict[str, Any]]]:
    settings = CorrectnessProbe(cases=[str(cases)], **config)
    with RecordWriter(tmp_path / "records.jsonl") as records:
        ctx = ProbeContext(
            endpoints={"sim": Endpoint(url, ("openai", "tgi"))},
            config=settings,
            out_dir=tmp_path,
            records=records,
            seed=7,
            deployment=DEPLOYMENT,
            progress=progress,
        )
        outcome = await run(ctx)
    return outcome, read_records(tmp_path / "records.jsonl")


async def test_the_sim_goldens_pass_with_twins_and_skips(tmp_path: Path) -> None:
    async with SimServer(sim_params()) as server:
        outcome, records = await probe(server.url, tmp_path)
    counts = outcome.summary["cases"]
    assert outcome.verdict.status == Status.PASS, outcome.summary
    assert counts["failed"] == counts["errored"] == 0
    assert counts["skipped"] == 1  # bf16-only-skip (sharded-skip runs: one shard)
    assert outcome.summary["seed"] == 7
    assert records[0] == {"kind": "plan", "seed": 7, "cases": records[0]["cases"]}
    cases = [r for r in records if r["kind"] == "case"]
    assert len(cases) == counts["total"]
    twins = [r for r in cases if r["stream"]]
    assert twins
    # the skip_check case "unchecked" ran, streamed well, and was compared to nothing
    assert {r["id"] for r in cases if r["status"] == "UNCHECKED"} == {
        "unchecked/openai",
        "unchecked/openai/stream",
    }
    assert counts["unchecked"] == 2
    assert all(r["status"] == "PASS" for r in twins if r["case"] != "unchecked")
    assert any(r["case"] == "stop-sequence" and r["protocol"] == "tgi" for r in twins)
    skipped = next(r for r in cases if r["status"] == "SKIPPED")
    assert skipped["reason"] == "skipped by unless: {dtype: bfloat16} (a bfloat16 regression)"


async def test_corrupted_answers_fail_with_the_first_divergence(tmp_path: Path) -> None:
    async with SimServer(sim_params(corrupt_rate=1.0)) as server:
        outcome, _ = await probe(server.url, tmp_path)
    counts = outcome.summary["cases"]
    assert outcome.verdict.status == Status.FAIL
    assert counts["errored"] == 0
    assert counts["failed"] >= 6
    failure = next(f for f in outcome.summary["failures"] if f["case"] == "plain-prompt/openai")
    first = failure["first_divergence"]
    assert first["unit"] == "char"  # the simulator returns no token texts over OpenAI
    assert first["index"] < 4  # within the first word
    assert first["expected_token"] != first["actual_token"]
    assert failure["expected"]["text"] != failure["actual"]["text"]


async def test_a_server_gone_mid_run_gives_error_not_fail(tmp_path: Path) -> None:
    server = SimServer(SimParams(seed=0, max_model_len=256, itl_ms=30))
    await server.start()
    first_result = asyncio.Event()
    task = asyncio.ensure_future(
        probe(server.url, tmp_path, progress=lambda _m: first_result.set(), concurrency=2)
    )
    async with asyncio.timeout(30):
        await first_result.wait()
    await server.stop()
    async with asyncio.timeout(60):
        outcome, records = await task
    counts = outcome.summary["cases"]
    assert outcome.verdict.status == Status.ERROR, outcome.summary
    assert counts["failed"] == 0
    assert counts["errored"] >= 1
    reasons = [e["reason"] for e in outcome.summary["errors"]]
    assert any("cannot connect" in r or "closed" in r for r in reasons), reasons
    assert len([r for r in records if r["kind"] == "case"]) == counts["total"]
    gc.collect()  # a socket leaked by stopping the server would warn here, in this test


async def test_shuffle_order_follows_the_seed(tmp_path: Path) -> None:
    async with SimServer(sim_params()) as server:
        orders = []
        for n, seed in enumerate((1, 1, 2)):
            folder = tmp_path / str(n)
            outcome, records = await probe(server.url, folder, concurrency=1, shuffle_seed=seed)
            assert outcome.summary["seed"] == seed
            orders.append([r["id"] for r in records if r["kind"] == "case" and not r["stream"]])
    assert orders[0] == orders[1]
    assert orders[0] != orders[2]


async def test_record_then_run_passes_and_keeps_rules(tmp_path: Path) -> None:
    cases = tmp_path / "cases.yaml"
    cases.write_text(
        textwrap.dedent(
            """\
            # my cases
            - name: greet
              protocol: both
              request: {prompt: "Hello there", max_new_tokens: 4}
              skip: [single_shard_only]
            - name: refuse
              request: {prompt: "x", max_new_tokens: 4, extra: {model: nope}}
              error: {status: 404, message: EXIST}
            - name: free
              request: {prompt: "y", max_new_tokens: 2}
              skip_check: true
            """
        )
    )
    config = CorrectnessProbe(cases=[str(cases)])
    async with SimServer(sim_params()) as server:
        endpoint = Endpoint(server.url, ("openai", "tgi"))
        recorded = await generate_file(cases, endpoint, config, DEPLOYMENT)
        write(recorded, "sim")
        document = yaml.safe_load(cases.read_text())
        outcome, _ = await probe(server.url, tmp_path / "run", cases=cases)
    assert cases.read_text().startswith("# my cases\n# Recorded by testbed record from sim")
    greet, refuse, free = document
    assert greet["skip"] == ["single_shard_only"]
    assert greet["expected"]["openai"]["completion_tokens"] == 4
    assert greet["expected"]["tgi"]["finish_reason"] == "length"
    assert refuse["error"] == {"status": 404, "message": "EXIST"}  # loose message kept
    assert "expected" not in free
    assert outcome.verdict.status == Status.PASS, outcome.summary
    # the skip_check case (unary and its streaming twin) ran but was compared to nothing
    counts = outcome.summary["cases"]
    assert counts["unchecked"] == 2
    assert counts["passed"] == counts["total"] - 2
    assert {u["case"] for u in outcome.summary["unchecked"]} == {
        "free/openai",
        "free/openai/stream",
    }
    assert "2 unchecked" in outcome.verdict.reason


async def test_only_unchecked_cases_are_inconclusive(tmp_path: Path) -> None:
    cases = tmp_path / "cases.yaml"
    cases.write_text(
        '- {name: free, request: {prompt: "y", max_new_tokens: 2}, skip_check: true}\n'
    )
    async with SimServer(sim_params()) as server:
        outcome, records = await probe(server.url, tmp_path, cases=cases)
    assert [r["status"] for r in records if r["kind"] == "case"] == ["UNCHECKED"] * 2
    assert outcome.summary["cases"]["passed"] == 0
    assert outcome.verdict.status == Status.INCONCLUSIVE
    assert "no case was compared" in outcome.verdict.reason


async def test_through_the_pipeline_a_killed_server_is_an_error(tmp_path: Path) -> None:
    campaign = textwrap.dedent(
        f"""\
        name: killed
        deployments:
          - name: sim
            server: sim
            params: {{seed: 0, max_model_len: 256, itl_ms: 40}}
        correctness:
          cases: [{SIM_CASES}]
          concurrency: 1
        execution: {{retries: 0}}
        """
    )
    loaded = load_campaign_text(campaign, "killed.yaml")
    run_dir, plan = open_new(loaded, RunOptions(out=tmp_path / "run"))
    task = asyncio.ensure_future(execute(loaded, run_dir, plan, RunOptions()))
    (treatment,) = plan.treatments
    records = run_dir.path / treatment.dirname / "records.jsonl"
    deadline = monotonic_ns() + 60 * 10**9
    while not any(r["kind"] == "case" and r["status"] != "SKIPPED" for r in read_records(records)):
        assert monotonic_ns() < deadline, "no case result within 60 s"
        assert not task.done()
        await asyncio.sleep(0.02)
    (pid_file,) = (run_dir.path / "pids").glob("*.json")
    os.killpg(json.loads(pid_file.read_text())["pid"], signal.SIGKILL)
    async with asyncio.timeout(60):
        outcome = await task
    verdict = outcome.verdicts[treatment.id]
    assert verdict.status == Status.ERROR
    # Whichever sees it first: the backend (the server died) or the cases (no connection).
    causes = ("died", "exited", "cannot connect", "closed")
    assert any(cause in verdict.reason for cause in causes), verdict.reason
    assert all(r["status"] != "FAIL" for r in read_records(records) if r["kind"] == "case")


async def test_run_dir_differentials_after_a_pipeline_run(tmp_path: Path) -> None:
    from testbed.probes.correctness.differential import run_dir_differentials

    campaign = textwrap.dedent(
        f"""\
        name: diff
        deployments:
          - {{name: good, server: sim, params: {{seed: 0, max_model_len: 256}}}}
          - {{name: same, server: sim, params: {{seed: 0, max_model_len: 256}}}}
          - name: bad
            server: sim
            params: {{seed: 0, max_model_len: 256, faults: {{corrupt_rate: 1}}}}
        correctness:
          cases: [{SIM_CASES}]
          protocol: both
          reference: good
        """
    )
    loaded = load_campaign_text(campaign, "diff.yaml")
    run_dir, plan = open_new(loaded, RunOptions(out=tmp_path / "run"))
    await execute(loaded, run_dir, plan, RunOptions())
    found = run_dir_differentials(run_dir.path)
    by_deployment = {summary["deployment"]: summary for summary in found.values()}
    assert set(by_deployment) == {"same", "bad"}
    assert by_deployment["same"]["divergences"] == []
    bad = by_deployment["bad"]
    assert bad["compared"] == by_deployment["same"]["compared"] > 10
    kinds = {f"{d['case']}/{d['protocol']}": d["kind"] for d in bad["divergences"]}
    # The simulator gives logprobs over OpenAI, so the divergence is classified: the
    # corrupted token is the reference's runner-up by a wide margin, not a near-tie.
    assert kinds["plain-prompt/openai"] == "different"
    assert "unknown-model/openai" not in kinds  # refused the same way on both


async def test_one_case_blowing_up_never_cancels_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from testbed.core.errors import MissingDependency
    from testbed.probes.correctness import embedding

    cases = tmp_path / "cases.yaml"
    cases.write_text(
        textwrap.dedent(
            """\
            - name: fine
              request: {prompt: "a b", max_new_tokens: 2}
              evaluate: {regex: "^ "}
            - name: meaning
              request: {prompt: "c d", max_new_tokens: 2}
              evaluate: {similarity: {to: "anything"}}
            - name: also-fine
              request: {prompt: "e f", max_new_tokens: 2}
              evaluate: {contains: " "}
            """
        )
    )

    async def missing(self: object, a: str, b: str) -> float:
        raise MissingDependency("sentence-transformers", "embeddings")

    monkeypatch.setattr(embedding.Embedder, "similarity", missing)
    async with SimServer(sim_params()) as server:
        outcome, _ = await probe(server.url, tmp_path / "run", cases=cases, concurrency=1)
    counts = outcome.summary["cases"]
    assert (counts["passed"], counts["errored"]) == (4, 1)
    (error,) = outcome.summary["errors"]
    assert error["case"] == "meaning/openai"
    assert "pip install 'testbed[embeddings]'" in error["reason"]
    assert outcome.verdict.status == Status.ERROR
