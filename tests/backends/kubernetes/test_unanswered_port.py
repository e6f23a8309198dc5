"""A worker whose pod is Ready but whose server port nothing answers (on the emulator: an image
it runs no process for, as a TGI image) ends as ERROR in the kubelet's words and the
emulator's reason — not as a connection closed mid-response."""

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
