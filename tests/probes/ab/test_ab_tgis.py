"""The A/B probe over TGIS's gRPC: two simulators that serve only tgis, paired."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.clients.endpoint import Endpoint
from testbed.config.ab import AbProbe
from testbed.config.sim import SimParams
from testbed.core.errors import InputError
from testbed.probes.ab import run
from testbed.probes.base import ProbeContext
from testbed.results.files import RecordWriter, read_records
from testbed.results.verdict import Status
from testbed.servers.sim.server import SimServer

ONLY_TGIS = SimParams(protocols=("tgis",), seed=1)


def _endpoint(server: SimServer) -> Endpoint:
    return Endpoint(server.url, protocols=("tgis",), grpc_target=server.grpc_target)


async def test_identical_sides_agree_over_grpc(tmp_path: Path) -> None:
    # the subject is the gRPC path (pairs, agreement, records), not latency: two in-process
    # simulators on a busy machine may straddle a latency limit (INCONCLUSIVE), by design
    config = AbProbe.model_validate(
        {"stable": "a", "canary": "b", "api": "tgis", "requests": 60, "max_tokens": 4,
         "criteria": {"min_agreement": 0.9, "max_error_rate_increase": 0.1,
                      "max_ttft_p50_regression": None, "max_itl_p50_regression": None,
                      "max_e2e_p50_regression": None}}
    )  # fmt: skip
    async with SimServer(ONLY_TGIS) as a, SimServer(ONLY_TGIS) as b:
        endpoints = {"a": _endpoint(a), "b": _endpoint(b)}
        with RecordWriter(tmp_path / "records.jsonl") as records:
            ctx = ProbeContext(endpoints, config, tmp_path, records, seed=4, base_dir=tmp_path)
            outcome = await run(ctx)
    assert outcome.verdict.status == Status.PASS, outcome.verdict.reason
    ab = outcome.summary["ab"]
    assert ab["n_pairs"] == 60
    assert ab["agreement"]["value"] == 1.0
    written = read_records(tmp_path / "records.jsonl")
    assert {r["usage_output_tokens"] for r in written} == {4}
    assert all(len(r["chunks_ns"]) == 4 for r in written)


async def test_a_side_without_tgis_is_refused(tmp_path: Path) -> None:
    config = AbProbe.model_validate({"stable": "a", "canary": "b", "api": "tgis", "requests": 2})
    async with SimServer(ONLY_TGIS) as a, SimServer(SimParams()) as b:
        endpoints = {"a": _endpoint(a), "b": Endpoint(b.url, protocols=("openai", "tgi"))}
        with RecordWriter(tmp_path / "records.jsonl") as records:
            ctx = ProbeContext(endpoints, config, tmp_path, records, base_dir=tmp_path)
            with pytest.raises(InputError, match="does not speak TGIS"):
                await run(ctx)


async def test_an_openai_api_on_sides_that_serve_only_tgis_is_refused(tmp_path: Path) -> None:
    config = AbProbe.model_validate({"stable": "a", "canary": "b", "api": "chat", "requests": 2})
    only_tgis = Endpoint("http://127.0.0.1:9", protocols=("tgis",), grpc_target="127.0.0.1:9")
    with RecordWriter(tmp_path / "records.jsonl") as records:
        ctx = ProbeContext({"a": only_tgis, "b": only_tgis}, config, tmp_path, records)
        with pytest.raises(
            InputError,
            match=r"does not speak OPENAI \(it serves tgis\);"
            r" set ab.api to one of tgis$",
        ):
            await run(ctx)
