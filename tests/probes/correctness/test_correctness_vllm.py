"""The SmolLM2 goldens (recorded from the reference server) against real vLLM on CPU.

vLLM runs from .venv-vllm, started by the local backend as the vllm-vs-reference campaign
describes it (the session's ``vllm_server``, tests/fixtures/servers.py). Greedy float32
answers must match the reference server's; seeded sampling is skipped by the case's own rule
(another sampler), and TGI-only cases by the protocol.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.config.correctness import CorrectnessProbe
from testbed.execution.single import Provisioned
from testbed.probes.base import ProbeContext
from testbed.probes.correctness import run
from testbed.results.files import RecordWriter
from testbed.results.verdict import Status

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

EXAMPLES = Path(__file__).parents[3] / "examples"


async def test_smollm2_goldens_against_vllm(vllm_server: Provisioned, tmp_path: Path) -> None:
    settings = CorrectnessProbe(
        cases=[str(EXAMPLES / "cases" / "smollm2.yaml")], concurrency=4, reference="reference"
    )
    with RecordWriter(tmp_path / "records.jsonl") as records:
        ctx = ProbeContext(
            endpoints={"vllm": vllm_server.handle.endpoint},
            config=settings,
            out_dir=tmp_path,
            records=records,
            deployment=vllm_server.document,
        )
        outcome = await run(ctx)
    counts = outcome.summary["cases"]
    assert counts["errored"] == 0, outcome.summary["errors"]
    skipped = {s["case"]: s["reason"] for s in outcome.summary["skipped"]}
    assert "server does not speak the tgi protocol" in skipped["tgi-top-tokens/tgi"]
    assert "another server's sampler" in skipped["seeded-sampling/openai"]
    assert outcome.verdict.status == Status.PASS, outcome.summary["failures"]
