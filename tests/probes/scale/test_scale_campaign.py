"""examples/scale-test.yaml run by the pipeline against the emulator: a matrix over
scale.parallel, a verdict per treatment, times.csv and the plot in each treatment directory,
the report's Scale section, and nothing left in the cluster."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testbed.clients.kube.connection import ConnectionSpec
from testbed.clients.kube.rest import KindInfo, Kube

pytestmark = [pytest.mark.kubernetes, pytest.mark.slow]
EXAMPLE = Path(__file__).parents[3] / "examples" / "scale-test.yaml"


def test_example_campaign_runs_to_a_verdict(cluster_kubeconfig: Path, tmp_path: Path) -> None:
    sets = {
        "backend.kubeconfig": str(cluster_kubeconfig),
        "scale.workloads": "6",
        "scale.gpus": "1",
        "scale.namespace": "scale-campaign",
        "matrix.factors": "{scale.parallel: [1, 3]}",
    }
    command = [sys.executable, "-m", "testbed", "run", str(EXAMPLE), "--out", str(tmp_path / "run")]
    for key, value in sets.items():
        command += ["--set", f"{key}={value}"]
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run = tmp_path / "run"
    treatments = sorted(p for p in run.iterdir() if p.is_dir() and "__" in p.name)
    assert len(treatments) == 2
    for directory in treatments:
        summary = json.loads((directory / "summary.json").read_text())
        assert summary["verdict"]["status"] == "PASS"
        checks = summary["verdict"]["evidence"]["thresholds"]
        assert [c["threshold"] for c in checks] == [
            "p99 scheduled→running < 5 s",
            "p99 submitted→scheduled < 30 s",
        ]
        assert all(c["reached"] == 6 for c in checks)
        assert summary["scale"]["submit"]["created"] == 6
        assert (directory / "times.csv").read_text().count("\n") == 7
        assert (directory / "general.png").stat().st_size > 10_000
        assert len((directory / "records.jsonl").read_text().splitlines()) == 6
    assert "Scale</h2>" in (run / "report.html").read_text()
    kube = Kube.connect(ConnectionSpec(kubeconfig=str(cluster_kubeconfig)))
    jobs, _ = kube.list_collection(KindInfo("batch/v1", "jobs"), "scale-campaign")
    assert jobs == []  # cleanup: true deleted them


def test_interrupted_campaign_leaves_records_and_no_objects(
    cluster_kubeconfig: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    command = [sys.executable, "-m", "testbed", "run", str(EXAMPLE), "--out", str(run)]
    sets = {
        "backend.kubeconfig": str(cluster_kubeconfig),
        "scale.workloads": "200",
        "scale.parallel": "1",
        "scale.delay_s": "0.2",
        "scale.gpus": "0",
        "scale.namespace": "scale-interrupted",
        "matrix": "null",
    }
    for key, value in sets.items():
        command += ["--set", f"{key}={value}"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = list(run.glob("*/submitted.json"))
            if found and found[0].read_text().count("\n") > 5:
                break
            time.sleep(0.1)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130, out[-2000:] + err[-2000:]
    (treatment,) = [p for p in run.iterdir() if p.is_dir() and "__" in p.name]
    lines = (treatment / "submitted.json").read_text().splitlines()
    assert 5 < len(lines) < 200
    assert (treatment / "times.csv").exists()
    kube = Kube.connect(ConnectionSpec(kubeconfig=str(cluster_kubeconfig)))
    jobs, _ = kube.list_collection(KindInfo("batch/v1", "jobs"), "scale-interrupted")
    assert jobs == []
