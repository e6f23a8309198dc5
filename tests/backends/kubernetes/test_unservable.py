"""What a cluster cannot serve ends with a message that says why, and leaves nothing: a pod
that is Ready but whose server port nothing answers (on the emulator: an image it runs no
process for, as a TGI image), and Datashim mode on a cluster without Datashim's CRD."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from testbed.clients.kube import ConnectionSpec, Kube, connect
from tests.backends.kubernetes.conftest import leftovers, run_cli
from tests.backends.kubernetes.test_e2e import SIM_CAMPAIGN

pytestmark = [pytest.mark.kubernetes]  # the emulator's behaviour: no `cluster` marker


def test_a_port_nothing_answers_is_an_error_that_says_so(
    tmp_path: Path, cluster_kubeconfig: Path
) -> None:
    data = json.loads(json.dumps(SIM_CAMPAIGN))
    data["deployments"][0]["image"] = "registry.example/not-testbed:1.0"
    campaign = tmp_path / "campaign.yaml"
    campaign.write_text(yaml.safe_dump(data))
    run_dir = tmp_path / "k8s-unanswered"
    result = run_cli(["run", str(campaign), "--out", str(run_dir)], cluster_kubeconfig, tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    (summary_file,) = run_dir.glob("*/summary.json")
    reason = json.loads(summary_file.read_text())["verdict"]["reason"]
    assert "server lost during the probe: pod tb-sim-" in reason
    assert "does not answer on port 8000: error forwarding port 8000 to pod" in reason
    assert "image registry.example/not-testbed:1.0 is neither a testbed nor a vLLM image" in reason
    api = connect(ConnectionSpec(kubeconfig=str(cluster_kubeconfig)))
    try:
        assert leftovers(Kube(api), "k8s-unanswered") == []
    finally:
        api.close()


def test_datashim_on_a_cluster_without_it_says_what_to_install(
    tmp_path: Path, cluster_kubeconfig: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = json.loads(json.dumps(SIM_CAMPAIGN))
    data["backend"]["datashim"] = True
    data["deployments"] = [
        {
            "name": "ref",
            "server": "hf",
            "model": "s3://models/smollm2",
            "s3_endpoint_url": "http://127.0.0.1:9",
        }
    ]
    campaign = tmp_path / "campaign.yaml"
    campaign.write_text(yaml.safe_dump(data))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "id")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "key")
    run_dir = tmp_path / "k8s-no-datashim"
    result = run_cli(["run", str(campaign), "--out", str(run_dir)], cluster_kubeconfig, tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "this cluster does not serve Datasets (datashim.io/v1alpha1)" in result.stderr
    assert "set backend.datashim: false" in result.stderr
    assert "testbed cleanup" not in result.stderr  # its cleanup found nothing to leave
    api = connect(ConnectionSpec(kubeconfig=str(cluster_kubeconfig)))
    try:
        assert leftovers(Kube(api), "k8s-no-datashim") == []
    finally:
        api.close()
