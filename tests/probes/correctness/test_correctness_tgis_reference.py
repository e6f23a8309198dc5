"""examples/tgis-correctness.yaml as tgis-tester runs it: the SmolLM2 goldens over TGIS's
gRPC (``protocol: tgis``) against testbed's reference server (the session's, started from
the example's own ``fp32-threads1`` deployment, which serves openai, tgi and tgis).

Every case that TGIS can express passes, unary and as its streaming twin; chat cases are
skipped with their reason; and the gRPC answers equal the OpenAI ones of the same model.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.config.loader import load_campaign
from testbed.execution.single import Provisioned
from testbed.probes.base import ProbeContext
from testbed.probes.correctness import run
from testbed.results.files import RecordWriter, read_records
from testbed.results.verdict import Status

pytestmark = [pytest.mark.reference, pytest.mark.slow]

EXAMPLES = Path(__file__).parents[3] / "examples"


async def test_the_example_passes_over_grpc(reference_server: Provisioned, tmp_path: Path) -> None:
    loaded = load_campaign(EXAMPLES / "tgis-correctness.yaml")
    assert loaded.campaign.correctness is not None
    config = loaded.campaign.correctness.split()[0]  # the SmolLM2 suite
    assert config.protocol == "tgis"
    assert config.cases == ["cases/smollm2.yaml"]
    endpoint = reference_server.handle.endpoint
    assert "tgis" in endpoint.protocols
    assert endpoint.grpc_target is not None
    with RecordWriter(tmp_path / "records.jsonl") as records:
        ctx = ProbeContext(
            {"ref": endpoint},
            config,
            tmp_path,
            records,
            seed=3,
            deployment=reference_server.document,
            base_dir=loaded.base_dir,
        )
        outcome = await run(ctx)
    counts = outcome.summary["cases"]
    assert outcome.verdict.status == Status.PASS, outcome.summary
    assert counts["failed"] == counts["errored"] == 0
    results = [r for r in read_records(tmp_path / "records.jsonl") if r.get("kind") != "plan"]
    over_grpc = [r for r in results if r["protocol"] == "tgis" and r["status"] == "PASS"]
    assert len(over_grpc) >= 16  # eight or more cases, each unary and streamed
    assert {r["stream"] for r in over_grpc} == {True, False}
    skipped = {r["case"]: r["reason"] for r in results if r["status"] == "SKIPPED"}
    assert skipped, "the chat cases cannot run over TGIS"
    assert all("OpenAI protocol" in reason for reason in skipped.values())
    # a refusal over gRPC is judged like one over HTTP
    refused = next(r for r in over_grpc if r["case"] == "too-many-tokens" and not r["stream"])
    assert refused["output"]["error"]["status"] == 400
