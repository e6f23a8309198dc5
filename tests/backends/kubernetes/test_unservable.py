"""What a cluster cannot serve ends with a message that says why, and leaves nothing: a pod
that is Ready but whose server port nothing answers (on the emulator: an image it runs no
process for, as a TGI image), Datashim mode on a cluster without Datashim's CRD, and a
Dataset whose bucket cannot be mounted (the startup timeout names the FailedMount)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.backends.kubernetes.conftest import leftovers_at, run_cli
from tests.backends.kubernetes.test_e2e import SIM_CAMPAIGN
from tests.fixtures.cluster import emulated_cluster

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
    reason = _error_reason(run_dir, result)
    assert "server lost during the probe: pod tb-sim-" in reason
    assert "does not answer on port 8000: error forwarding port 8000 to pod" in reason
    assert "image registry.example/not-testbed:1.0 is neither a testbed nor a vLLM image" in reason
    assert leftovers_at(cluster_kubeconfig, "k8s-unanswered") == []


def _error_reason(run_dir: Path, result: subprocess.CompletedProcess[str]) -> str:
    """The ERROR (exit 3) verdict's reason of the run's one treatment."""
    assert result.returncode == 3, result.stdout + result.stderr
    (summary_file,) = run_dir.glob("*/summary.json")
    summary = json.loads(summary_file.read_text())
    assert summary["verdict"]["status"] == "ERROR"
    return str(summary["verdict"]["reason"])


def _datashim_campaign(tmp_path: Path, **backend: object) -> Path:
    """One hf worker whose weights are a Datashim Dataset over a bucket at a closed port."""
    data = json.loads(json.dumps(SIM_CAMPAIGN))
    data["backend"].update(datashim=True, **backend)
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
    return campaign


def test_datashim_on_a_cluster_without_it_says_what_to_install(
    tmp_path: Path, cluster_kubeconfig: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    campaign = _datashim_campaign(tmp_path)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "id")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "key")
    run_dir = tmp_path / "k8s-no-datashim"
    result = run_cli(["run", str(campaign), "--out", str(run_dir)], cluster_kubeconfig, tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "this cluster does not serve Datasets (datashim.io/v1alpha1)" in result.stderr
    assert "set backend.datashim: false" in result.stderr
    assert "testbed cleanup" not in result.stderr  # its cleanup found nothing to leave
    assert leftovers_at(cluster_kubeconfig, "k8s-no-datashim") == []


def test_a_dataset_that_cannot_mount_times_out_naming_the_failed_mount(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    campaign = _datashim_campaign(tmp_path, ready_timeout_s=20)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "id")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "key")
    run_dir = tmp_path / "k8s-no-mount"
    with emulated_cluster(tmp_path / "emulator", "--datashim") as kubeconfig:
        result = run_cli(["run", str(campaign), "--out", str(run_dir)], kubeconfig, tmp_path)
        assert leftovers_at(kubeconfig, "k8s-no-mount") == []
    reason = _error_reason(run_dir, result)
    assert "startup timeout — the pod was not ready within 20 s" in reason
    assert "the cluster's last warnings: FailedMount: MountVolume.SetUp failed for volume" in reason
    assert "copying s3://models from http://127.0.0.1:9 failed" in reason
