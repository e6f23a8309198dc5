"""Server metrics from the real servers: testbed's reference server and vLLM, each shared by
the test session (tests/fixtures/servers.py). A short load run must show the server busy
and its token counters equal to the usage it returned."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from testbed.config.load import LoadProbe
from testbed.execution.single import Provisioned
from testbed.probes import load
from testbed.probes.base import ProbeContext
from testbed.results.files import RecordWriter, read_records


def _load(server: Provisioned, out: Path) -> dict[str, Any]:
    config = LoadProbe.model_validate(
        {
            "concurrency": 2,
            "requests": 6,
            "duration_s": None,
            "dataset": {"input_tokens": 16, "output_tokens": 12, "samples": 6},
            "server_metrics": {"interval_s": 0.2},
        }
    )
    with RecordWriter(out / "records.jsonl") as records:
        ctx = ProbeContext({server.deployment: server.handle.endpoint}, config, out, records)
        outcome = asyncio.run(load.run(ctx))
    summary: dict[str, Any] = outcome.summary
    return summary


def _check(summary: dict[str, Any], out: Path, name: str) -> dict[str, Any]:
    part = summary["server_metrics"]
    server = part["deployments"][name]
    records = read_records(out / "records.jsonl")
    assert len(records) == 6
    assert all(r["error"] is None for r in records), records[0]
    assert server["failed_scrapes"] == 0
    assert server["running"]["max"] >= 1.0  # the scrapes saw the requests being served
    usage = sum(r["usage_output_tokens"] for r in records)
    assert server["generation_tokens"] == usage == server["client"]["output_tokens"]
    assert server["prompt_tokens"] == sum(r["usage_input_tokens"] for r in records)
    assert part["flagged"] == []
    return dict(server)


@pytest.mark.reference
def test_reference_server_metrics(reference_server: Provisioned, tmp_path: Path) -> None:
    summary = _load(reference_server, tmp_path)
    _check(summary, tmp_path, reference_server.deployment)


@pytest.mark.vllm
def test_vllm_server_metrics(vllm_server: Provisioned, tmp_path: Path) -> None:
    summary = _load(vllm_server, tmp_path)
    server = _check(summary, tmp_path, vllm_server.deployment)
    assert server["kv_cache_usage"] is not None
    assert 0.0 <= server["kv_cache_usage"]["max"] <= 1.0
