"""A worker whose pod fails for a cause a fresh start meets again is not started again
(issue 32): with the default ``execution.retries`` (1), an image the cluster cannot pull
ERRORs after one start, saying why there was no retry — the retry pulled the same image and
doubled the wait. (A crash-looping stack: tests/backends/kubernetes/test_stack_shapes.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from testbed.clients.kube import Kube
from tests.backends.kubernetes.conftest import leftovers, run_cli
from tests.backends.kubernetes.test_e2e import SIM_CAMPAIGN, summaries

pytestmark = [pytest.mark.kubernetes, pytest.mark.cluster]


def test_an_image_that_cannot_be_pulled_is_not_retried(
    tmp_path: Path, kubeconfig: Path, kube: Kube
) -> None:
    data = json.loads(json.dumps(SIM_CAMPAIGN))
    data.pop("execution")  # the default: one retry
    data["deployments"][0]["placement"] = {
        "pod_annotations": {"emulator.testbed.io/fault": "image-pull"}
    }
    (tmp_path / "campaign.yaml").write_text(yaml.safe_dump(data))
    run_dir = tmp_path / "k8s-pull-once"
    result = run_cli(
        ["run", str(tmp_path / "campaign.yaml"), "--out", str(run_dir)], kubeconfig, tmp_path
    )
    assert result.returncode == 3, result.stdout + result.stderr
    (summary,) = summaries(run_dir)
    reason = summary["verdict"]["reason"]
    assert summary["verdict"]["status"] == "ERROR"
    assert "ImagePull" in reason, reason
    assert "not retried: a fresh start pulls the same image" in reason, reason
    assert "the first attempt ended" not in reason, reason
    assert "retrying" not in result.stdout, result.stdout
    assert leftovers(kube, "k8s-pull-once") == []
