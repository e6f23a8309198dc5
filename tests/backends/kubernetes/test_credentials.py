"""A wrong token (401 from the API server) ends the run with the cluster's reason, and does
not claim that objects may remain: nothing was created."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.backends.kubernetes.conftest import run_cli
from tests.backends.kubernetes.test_e2e import write_campaign

pytestmark = [pytest.mark.kubernetes]


def test_a_wrong_token_creates_nothing_and_says_so(tmp_path: Path, kubeconfig: Path) -> None:
    config = yaml.safe_load(kubeconfig.read_text())
    for user in config["users"]:
        user["user"] = {"token": "not-the-token"}
    wrong = tmp_path / "wrong-kubeconfig"
    wrong.write_text(yaml.safe_dump(config))
    campaign = write_campaign(tmp_path)
    run_dir = tmp_path / "k8s-401"
    result = run_cli(["run", str(campaign), "--out", str(run_dir)], wrong, tmp_path, timeout=120)
    output = result.stdout + result.stderr
    assert result.returncode == 3, output
    assert "401" in output or "Unauthorized" in output, output
    assert "may remain" not in output
    assert "nothing of run k8s-401 was created" in output
    assert "Traceback" not in output
