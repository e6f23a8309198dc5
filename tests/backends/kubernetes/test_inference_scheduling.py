"""llm-d's inference-scheduling experiment rehearsed end to end (issue 20's done-when):
``testbed run examples/inference-scheduling.yaml --preset smoke --set backend.kind=kubernetes``
against ``testbed cluster emulate --gateway-stand-in``. The stack goes in as written (published
CRDs, Gateway, HTTPRoute, InferencePool, llm-d's EPP and vLLM images); the criterion that
load-aware and prefix-aware picking beat random on TTFT p90 must PASS with its interval in the
report; ``testbed compare`` of two pickers names the better; nothing is left behind."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.backends.kubernetes.conftest import leftovers_at, run_cli
from tests.fixtures.cluster import emulated_cluster

pytestmark = [pytest.mark.kubernetes, pytest.mark.slow]
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "inference-scheduling.yaml"


def test_smarter_pickers_beat_random_on_the_emulator(tmp_path: Path) -> None:
    with emulated_cluster(tmp_path / "emulator", "--gateway-stand-in", "--nodes", "2") as kube:
        run_dir = tmp_path / "sched"
        args = ["run", str(EXAMPLE), "--preset", "smoke", "--set", "backend.kind=kubernetes"]
        started = time.monotonic()
        result = run_cli([*args, "--out", str(run_dir)], kube, tmp_path, timeout=300)
        wall = time.monotonic() - started
        assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
        assert wall < 300
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["status"] == "PASS"
        (criterion,) = summary["criteria"]
        assert criterion["status"] == "PASS"
        for comparison in criterion["comparisons"]:
            assert comparison["interval"][1] < -0.10, comparison  # beaten by more than 10 %
        assert "beats the baseline by more than the margin" in " ".join(result.stdout.split())
        assert 'id="criteria"' in (run_dir / "report.html").read_text()

        random_dir, _, prefix_dir = sorted(p for p in run_dir.iterdir() if p.name[:3].isdigit())
        compared = run_cli(
            ["compare", str(random_dir), str(prefix_dir), "--metric", "ttft_ms.*"], kube, tmp_path
        )
        assert compared.returncode == 0, compared.stdout + compared.stderr
        assert f"better: {prefix_dir.name} (candidate) beats" in " ".join(compared.stdout.split())

        assert leftovers_at(kube, "sched") == []
        crds = subprocess.run(
            ["kubectl", "--kubeconfig", str(kube), "get", "crd", "-o", "name"],
            capture_output=True, text=True, check=True, timeout=60,
        )  # fmt: skip
        assert "gateway.networking.k8s.io" not in crds.stdout  # the stack's CRDs went with it
