"""``backend: external``: nothing provisioned, probes run against a URL, the key stays secret."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from testbed.config.deployments import ExternalDeployment, deployment_model
from testbed.config.loader import load_campaign_text
from testbed.config.sim import SimParams
from testbed.execution.pipeline import execute, open_new
from testbed.execution.run import RunOptions
from testbed.servers.sim import running_sim
from tests.verdicts import assert_passed

SECRET = "tok-3f9a1c-very-secret"


async def test_external_campaign_runs_and_never_writes_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SIM_TOKEN", SECRET)
    # The simulator shares the probe's event loop here: paced so that the loop mostly waits
    # (at 1 ms per token it was busy 91% of the time and the self-check said INCONCLUSIVE).
    async with running_sim(SimParams(ttft_ms=5, itl_ms=5)) as url:
        text = textwrap.dedent(
            f"""\
            name: ext
            backend: external
            deployments:
              - name: prod
                server: external
                url: {url}
                model: sim-model
                api_key: ${{env:SIM_TOKEN}}
            load:
              profile: concurrency
              requests: 5
              dataset: {{kind: synthetic, input_tokens: 8, output_tokens: 4}}
            """
        )
        loaded = load_campaign_text(text, "ext.yaml")
        run_dir, plan = open_new(loaded, RunOptions(out=tmp_path / "run"))
        outcome = await execute(loaded, run_dir, plan, RunOptions())
    (treatment,) = plan.treatments
    summary = json.loads((run_dir.path / treatment.dirname / "summary.json").read_text())
    assert summary["verdict"]["status"] == outcome.verdicts[treatment.id].status.value
    assert_passed(summary)
    assert summary["records"] == 5
    for path in run_dir.path.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    assert "${env:SIM_TOKEN}" in (run_dir.path / "campaign.resolved.yaml").read_text()


def test_every_external_field_reaches_the_endpoint(tmp_path: Path) -> None:
    from testbed.backends.external import external_endpoint

    deployment = ExternalDeployment.model_validate(
        {
            "name": "gw",
            "server": "external",
            "url": "https://gw.example:8443/",
            "protocol": "tgi",
            "model": "served-name",
            "api_key": "${env:GW_KEY}",
            "tokenizer": "/models/tok",
            "tls": {"verify": False, "ca_bundle": "ca.pem"},
        }
    )
    endpoint = external_endpoint(deployment, tmp_path)
    assert endpoint.base_url == "https://gw.example:8443"
    assert endpoint.protocols == ("tgi",)
    assert endpoint.model == "served-name"
    assert endpoint.api_key == "${env:GW_KEY}"  # resolved only when a header is built
    assert endpoint.tokenizer == "/models/tok"
    assert endpoint.tls.verify is False
    assert endpoint.tls.ca_bundle == str(tmp_path / "ca.pem")


async def test_prepare_downloads_with_the_deployments_s3_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from testbed.backends.local import backend as local

    asked: list[tuple[str, str | None]] = []

    def resolve(model: str, *, endpoint_url: str | None = None, **_: object) -> Path:
        asked.append((model, endpoint_url))
        return tmp_path

    monkeypatch.setattr(local, "resolve_model", resolve)
    deployment = deployment_model(
        {"name": "v", "server": "vllm", "model": "s3://b/m", "s3_endpoint_url": "http://minio:9000"}
    )
    await local.LocalBackend(tmp_path).prepare([deployment])
    assert asked == [("s3://b/m", "http://minio:9000")]
