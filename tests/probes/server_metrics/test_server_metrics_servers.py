"""Server metrics from the real servers: testbed's reference server and vLLM, each shared by
the test session (tests/fixtures/servers.py). A short load run must show the server busy
and its token counters equal to the usage it returned; a campaign run against the same
server (as an external deployment) shows them in report.html under the load plots."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path
from typing import Any

import pytest

from testbed.cli import main
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
    assert server["kv_cache_usage"] is not None  # both expose vLLM's KV-cache gauge
    assert 0.0 <= server["kv_cache_usage"]["max"] <= 1.0
    return dict(server)


def _report(server: Provisioned, tmp_path: Path) -> str:
    """report.html of a `testbed run` of a small load campaign against ``server``."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    campaign = tmp_path / "metrics.yaml"
    endpoint = server.handle.endpoint
    campaign.write_text(
        textwrap.dedent(
            f"""\
            name: metrics
            deployments:
              - {{name: srv, server: external, url: "{endpoint.base_url}",
                 model: "{endpoint.model}", tokenizer: "{endpoint.tokenizer}"}}
            load:
              concurrency: 2
              requests: 4
              duration_s: null
              dataset: {{input_tokens: 16, output_tokens: 8, samples: 4}}
              server_metrics: {{interval_s: 0.2}}
            """
        )
    )
    out = tmp_path / "run"
    assert main(["run", str(campaign), "--out", str(out)]) == 0
    return (out / "report.html").read_text(encoding="utf-8")


def _check_report(html: str) -> None:
    load = html[html.index('<section id="load">') :]
    load = load[: load.index("</section>")]
    assert "<h4>Server metrics</h4>" in load
    assert 'aria-label="server metrics"' in load  # the figure, under the client's time series
    assert load.index('aria-label="time series"') < load.index('aria-label="server metrics"')
    assert 'class="flag"' not in load  # server and client counted the same tokens


@pytest.mark.reference
def test_reference_server_metrics(reference_server: Provisioned, tmp_path: Path) -> None:
    summary = _load(reference_server, tmp_path)
    server = _check(summary, tmp_path, reference_server.deployment)
    assert server["kv_cache_usage"]["max"] > 0.0  # the running requests' prompts and tokens
    _check_report(_report(reference_server, tmp_path / "campaign"))


@pytest.mark.vllm
def test_vllm_server_metrics(vllm_server: Provisioned, tmp_path: Path) -> None:
    summary = _load(vllm_server, tmp_path)
    _check(summary, tmp_path, vllm_server.deployment)
    _check_report(_report(vllm_server, tmp_path / "campaign"))
