"""The A/B probe end to end against two in-process simulators over loopback HTTP."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from testbed.clients.endpoint import Endpoint
from testbed.config.ab import AbProbe
from testbed.config.sim import SimParams
from testbed.core.errors import InfrastructureError
from testbed.probes.ab import PROMPTS_FILE, Scorer, prompts, run
from testbed.probes.base import ProbeContext, ProbeOutcome
from testbed.results.files import RecordWriter, read_records
from testbed.results.verdict import Status
from testbed.servers.sim import running_sim

FAST = {"ttft_ms": 3.0, "itl_ms": 1.0}
# Loose enough that 60 identical pairs can PASS (Wilson lower bound of 60/60 is 0.940).
CRITERIA = {"min_agreement": 0.9, "max_error_rate_increase": 0.1}


async def _probe(
    out: Path,
    stable: dict[str, Any],
    canary: dict[str, Any],
    config: dict[str, Any],
    scorer: Scorer | None = None,
    canary_url: str | None = None,
    model: str = "",
) -> ProbeOutcome:
    async with (
        running_sim(SimParams(**stable)) as stable_url,
        running_sim(SimParams(**canary)) as real_canary_url,
    ):
        endpoints = {
            "stable": Endpoint(stable_url, protocols=("openai", "tgi"), model=model),
            "canary": Endpoint(
                canary_url or real_canary_url, protocols=("openai", "tgi"), model=model
            ),
        }
        probe = AbProbe.model_validate(
            {
                "stable": "stable",
                "canary": "canary",
                "requests": 60,
                "max_tokens": 8,
                "criteria": CRITERIA,
                **config,
            }
        )
        with RecordWriter(out / "records.jsonl") as records:
            ctx = ProbeContext(endpoints, probe, out, records, seed=7, base_dir=out)
            return await run(ctx, scorer=scorer)


def probe(out: Path, stable: dict[str, Any], canary: dict[str, Any], **config: Any) -> ProbeOutcome:
    return asyncio.run(_probe(out, stable, canary, config))


def _status(outcome: ProbeOutcome, name: str) -> str:
    return next(e["status"] for e in outcome.summary["ab"]["criteria"] if e["name"] == name)


def test_slower_canary_fails_on_latency(tmp_path: Path) -> None:
    outcome = probe(
        tmp_path,
        {**FAST, "seed": 1},
        {"ttft_ms": 6.0, "itl_ms": 2.0, "seed": 1},
        criteria={**CRITERIA, "max_e2e_p50_regression": 0.1},
    )
    assert outcome.verdict.status is Status.FAIL, outcome.verdict.reason
    assert _status(outcome, "e2e_p50") == "FAIL"
    assert _status(outcome, "agreement") == "PASS"  # same seed: same texts
    e2e = outcome.summary["ab"]["latency"]["e2e_ms"]
    assert e2e["ratio"] > 1.5
    assert e2e["ci"][0] > 1.1
    assert e2e["wilcoxon_p"] < 1e-6


def test_corrupting_canary_fails_on_agreement(tmp_path: Path) -> None:
    outcome = probe(
        tmp_path, {**FAST, "seed": 1}, {**FAST, "seed": 1, "faults": {"corrupt_rate": 0.4}}
    )
    assert outcome.verdict.status is Status.FAIL, outcome.verdict.reason
    assert _status(outcome, "agreement") == "FAIL"
    agreement = outcome.summary["ab"]["agreement"]
    assert agreement["exact"] < 0.8
    assert agreement["disagreements"]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_identical_configurations_do_not_fail(tmp_path: Path, seed: int) -> None:
    params = {**FAST, "seed": seed}
    outcome = probe(tmp_path, params, params, seed=seed)
    assert outcome.verdict.status in (Status.PASS, Status.INCONCLUSIVE), outcome.verdict.reason
    assert _status(outcome, "agreement") == "PASS"
    assert _status(outcome, "error_rate") == "PASS"


def test_tiny_sample_is_inconclusive(tmp_path: Path) -> None:
    outcome = probe(
        tmp_path, {**FAST, "seed": 1}, {"ttft_ms": 9.0, "itl_ms": 3.0, "seed": 1}, requests=8
    )
    assert outcome.verdict.status is Status.INCONCLUSIVE
    assert "min_samples" in outcome.verdict.reason


def test_records_and_prompt_set_on_disk(tmp_path: Path) -> None:
    probe(tmp_path, {**FAST, "seed": 1}, {**FAST, "seed": 1}, requests=20)
    records = read_records(tmp_path / "records.jsonl")
    assert len(records) == 40
    assert {r["side"] for r in records} == {"stable", "canary"}
    for record in records:
        assert record["error"] is None
        assert record["status"] == 200
        assert (
            record["sent_ns"]
            < record["chunks_ns"][0]
            <= record["chunks_ns"][-1]
            <= record["done_ns"]
        )
        assert record["usage_output_tokens"] == 8
        assert record["text"]
    pairs = {(r["pair"], r["side"]) for r in records}
    assert len(pairs) == 40
    written = [json.loads(line) for line in (tmp_path / PROMPTS_FILE).read_text().splitlines()]
    assert {p["id"] for p in written} == {r["prompt_id"] for r in records}
    assert prompts.load(tmp_path / PROMPTS_FILE) == prompts.synthetic(20, 7)  # reloadable


@pytest.mark.parametrize("api", ["chat", "tgi"])
def test_other_protocols(tmp_path: Path, api: str) -> None:
    outcome = probe(tmp_path, {**FAST, "seed": 1}, {**FAST, "seed": 1}, api=api, requests=40)
    assert outcome.summary["ab"]["errors"]["canary"]["errors"] == 0
    assert outcome.summary["ab"]["agreement"]["exact"] == 1.0


def test_split_mode(tmp_path: Path) -> None:
    outcome = probe(
        tmp_path,
        {**FAST, "seed": 1},
        {"ttft_ms": 20.0, "itl_ms": 1.0, "seed": 1},
        mode="split",
        requests=120,
        concurrency=2,
        prompt_count=10,
    )
    ab = outcome.summary["ab"]
    assert ab["errors"]["stable"]["sent"] == ab["errors"]["canary"]["sent"] == 60
    assert ab["agreement"]["n"] == 10
    assert ab["agreement"]["exact"] == 1.0
    assert ab["latency"]["ttft_ms"]["wilcoxon_p"] is None
    assert _status(outcome, "ttft_p50") == "FAIL", ab["criteria"]


def test_open_loop(tmp_path: Path) -> None:
    outcome = probe(tmp_path, {**FAST, "seed": 1}, {**FAST, "seed": 1}, rate=100.0, requests=30)
    ab = outcome.summary["ab"]
    assert ab["n_pairs"] == 30
    assert ab["agreement"]["exact"] == 1.0


def test_embedding_similarity_with_a_given_scorer(tmp_path: Path) -> None:
    async def scorer(a: str, b: str) -> float:
        return 0.5  # nothing alike

    outcome = asyncio.run(
        _probe(
            tmp_path,
            {**FAST, "seed": 1},
            {**FAST, "seed": 2},
            {"similarity": "embedding"},
            scorer=scorer,
        )
    )
    agreement = outcome.summary["ab"]["agreement"]
    assert agreement["method"].startswith("embedding")
    assert agreement["similarity"] == 0.0
    assert _status(outcome, "agreement") == "FAIL"


@pytest.mark.parametrize("model", ["", "sim-model"])
def test_unreachable_canary_is_an_infrastructure_error(tmp_path: Path, model: str) -> None:
    # Without a model name the probe asks /v1/models first; with one, every request fails.
    with pytest.raises(InfrastructureError, match="canary"):
        asyncio.run(
            _probe(
                tmp_path, FAST, FAST, {"requests": 5}, canary_url="http://127.0.0.1:9", model=model
            )
        )


@pytest.mark.slow
def test_embedding_similarity_with_the_packaged_model(tmp_path: Path) -> None:
    """The correctness probe's embedder (all-MiniLM-L6-v2, offline) scores outputs that
    differ; equal outputs never reach the model."""
    outcome = asyncio.run(
        _probe(
            tmp_path,
            {**FAST, "seed": 1},
            {**FAST, "seed": 1, "faults": {"corrupt_rate": 0.3}},
            {"similarity": "embedding", "similarity_threshold": 0.999, "requests": 30},
        )
    )
    agreement = outcome.summary["ab"]["agreement"]
    assert agreement["method"] == "embedding cosine ≥ 0.999"
    assert agreement["exact"] < 1.0
    assert agreement["similarity_min"] is not None
    assert 0.0 < agreement["similarity_min"] < 0.999
    assert agreement["disagreements"][0]["similarity"] < 0.999
