"""The SmolLM2 goldens against testbed's reference server (the session's, one model load:
``fp32-threads1`` of examples/tgis-correctness.yaml, see tests/fixtures/servers.py).

The shipped cases pass; a second run with another concurrency and order gives the same
answers (the differential finds nothing); and recording them again reproduces the shipped
file's expectations: texts, ids and counts exactly, logprobs within the evaluators' tolerance.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed.config.correctness import CorrectnessProbe
from testbed.execution.single import Provisioned
from testbed.probes.base import ProbeContext, ProbeOutcome
from testbed.probes.correctness import run
from testbed.probes.correctness.differential import differential_summary
from testbed.probes.correctness.evaluators import close
from testbed.probes.correctness.goldens import generate_file
from testbed.results.files import RecordWriter, read_records
from testbed.results.verdict import Status

pytestmark = [pytest.mark.reference, pytest.mark.slow]

EXAMPLES = Path(__file__).parents[3] / "examples"


async def probe(ctx_args: dict[str, object], folder: Path, **config: object) -> ProbeOutcome:
    settings = CorrectnessProbe(cases=[str(EXAMPLES / "cases" / "smollm2.yaml")], **config)
    with RecordWriter(folder / "records.jsonl") as records:
        ctx = ProbeContext(config=settings, out_dir=folder, records=records, **ctx_args)  # type: ignore[arg-type]
        return await run(ctx)


async def test_smollm2_goldens_against_the_reference_server(
    reference_server: Provisioned, tmp_path: Path
) -> None:
    running = reference_server
    where = {"endpoints": {"ref": running.handle.endpoint}, "deployment": running.document}
    first = await probe(where, tmp_path / "a", concurrency=4, shuffle_seed=1, reference="x")
    second = await probe(where, tmp_path / "b", concurrency=1, shuffle_seed=2, reference="x")
    copy = tmp_path / "smollm2.yaml"
    shutil.copy(EXAMPLES / "cases" / "smollm2.yaml", copy)
    config = CorrectnessProbe(cases=[str(copy)])
    again = await generate_file(copy, running.handle.endpoint, config, running.document)
    for outcome in (first, second):
        counts = outcome.summary["cases"]
        assert outcome.verdict.status == Status.PASS, outcome.summary
        assert counts["failed"] == counts["errored"] == 0
        assert counts["skipped"] == 0  # fp32, one shard: every rule lets its case run
    diff = differential_summary(
        read_records(tmp_path / "a" / "records.jsonl"),
        read_records(tmp_path / "b" / "records.jsonl"),
        0.05,
    )
    assert diff["compared"] >= 15
    assert diff["divergences"] == []
    shipped = yaml.safe_load((EXAMPLES / "cases" / "smollm2.yaml").read_text())
    # Re-recorded on this CPU: texts, token ids and counts exactly as shipped; logprobs
    # within the tolerance the approx evaluator judges them with (float sums differ across
    # CPUs, so exact equality would fail on any machine but the one that recorded them).
    tolerance = config.tolerance
    assert len(again.document) == len(shipped)
    for recorded, golden in zip(again.document, shipped, strict=True):
        name = golden["name"]
        assert recorded.get("error") == golden.get("error"), name
        assert _strings_and_ints(recorded.get("expected")) == _strings_and_ints(
            golden.get("expected")
        ), name
        assert close(
            golden.get("expected"), recorded.get("expected"), tolerance.rel, tolerance.abs
        ), name


def _strings_and_ints(value: Any) -> Any:
    """``value`` with every float replaced by a marker: what must match exactly."""
    if isinstance(value, float):
        return "<float>"
    if isinstance(value, dict):
        return {k: _strings_and_ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_strings_and_ints(v) for v in value]
    return value
