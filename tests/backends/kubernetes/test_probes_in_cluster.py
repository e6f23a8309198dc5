"""``backend.probes: cluster`` end to end: the quickstart gives the same verdicts with its
probes in Jobs as from the controller; a probe pod killed mid-run is that treatment's ERROR
(exit 3) with its records kept, and ``--resume`` completes it; nothing of the run is left —
no object with its label, no process of its pods."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed.clients.kube import ConnectionSpec, Kube, connect
from testbed.results.files import read_records
from tests.backends.kubernetes.conftest import (
    LENIENT_SELFCHECK,
    leftovers,
    quickstart_args,
    run_cli,
    spawn,
)
from tests.fixtures.cluster import emulated_cluster
from tests.verdicts import assert_passed

pytestmark = [pytest.mark.kubernetes, pytest.mark.cluster]

#: The kinds a run with probes in the cluster adds to those conftest.RUN_KINDS checks.
PROBE_KINDS = ("Job", "ConfigMap")


def verdicts(run_dir: Path) -> dict[str, str]:
    return {
        p.parent.name: json.loads(p.read_text())["verdict"]["status"]
        for p in sorted(run_dir.glob("*/summary.json"))
    }


def probe_leftovers(kube: Kube, run_id: str) -> list[str]:
    found = leftovers(kube, run_id)
    for kind in PROBE_KINDS:
        items, _ = kube.list_objects(kind, None, f"testbed.io/run={run_id}")
        found += [f"{kind}/{i['metadata']['name']}" for i in items]
    return found


@pytest.mark.slow
def test_the_quickstart_gives_the_same_verdicts_with_probes_in_the_cluster(
    tmp_path: Path, kubeconfig: Path, kube: Kube, quickstart_on_cluster: Path
) -> None:
    # The cut quickstart with its probes in Jobs against the session's run of it with its
    # probes in testbed's process (which exited 0).
    here, there = quickstart_on_cluster, tmp_path / "qs-cluster"
    args = quickstart_args("backend.kind=kubernetes", "backend.probes=cluster")
    second = run_cli(["run", *args, "--out", str(there)], kubeconfig, tmp_path, timeout=600)
    assert second.returncode == 0, second.stdout + second.stderr
    assert verdicts(there) == verdicts(here)
    assert [name.rsplit("__", 1)[0] for name in verdicts(there)] == [
        "001__reference-correctness",
        "002__reference-load",
        "003__sim-load",
    ]
    for folder in sorted(there.glob("0*")):
        summary = json.loads((folder / "summary.json").read_text())
        job = summary["probe_job"]
        assert job["job"].startswith("tb-probe-qs-cluster-"), job
        assert summary["records"] == len(read_records(folder / "records.jsonl")) > 0
    controller = json.loads((next(here.glob("001__*")) / "summary.json").read_text())
    cluster = json.loads((next(there.glob("001__*")) / "summary.json").read_text())
    assert "probe_job" not in controller
    assert cluster["records"] == controller["records"] > 36  # every golden case, both ways
    assert cluster["verdict"]["reason"] == controller["verdict"]["reason"]
    assert controller["verdict"]["reason"].startswith("36 passed")  # then ", N skipped" if any
    # the load probe's own files (plots, server metrics) came back through the stream
    sim_load = next(there.glob("003__*"))
    assert (sim_load / "latency_cdf.png").read_bytes().startswith(b"\x89PNG")
    assert (sim_load / "server_metrics.jsonl").stat().st_size > 0
    for run_id in ("qs-controller", "qs-cluster"):
        assert probe_leftovers(kube, run_id) == []


SIM_CAMPAIGN: dict[str, Any] = {
    "name": "probe-kill",
    "backend": {"kind": "kubernetes", "probes": "cluster", "ready_timeout_s": 60},
    "deployments": [{"name": "sim", "server": "sim", "params": {"ttft_ms": 30, "itl_ms": 10}}],
    "load": {
        "profile": "concurrency",
        "concurrency": 2,
        "requests": 120,
        "duration_s": 300,  # the request count ends the stage, so records are countable
        "dataset": {"kind": "synthetic", "input_tokens": 16, "output_tokens": 8},
        "slo": {"ttft_p99_ms": 5000},
        "selfcheck": LENIENT_SELFCHECK,
    },
    "execution": {"retries": 0},
}


def processes_under(folder: Path) -> list[str]:
    """Live processes whose working directory lies under ``folder`` (the emulator's pods)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cwd = os.readlink(proc / "cwd")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if cwd.startswith(str(folder)) and state != "Z":
            found.append(f"{proc.name} {(proc / 'cmdline').read_bytes()[:200]!r}")
    return found


def wait_for_records(path: Path, at_least: int, child: Any, timeout_s: float = 120) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        count = len(read_records(path)) if path.exists() else 0
        if count >= at_least:
            return count
        assert child.poll() is None, child.communicate()[0]
        time.sleep(0.1)
    raise AssertionError(f"fewer than {at_least} records in {path} after {timeout_s} s")


def test_a_killed_probe_pod_is_an_error_and_resume_completes_the_records(
    tmp_path: Path,
) -> None:
    state = tmp_path / "emulator-state"
    campaign = tmp_path / "campaign.yaml"
    campaign.write_text(yaml.safe_dump(SIM_CAMPAIGN))
    run_dir = tmp_path / "probe-kill"
    with emulated_cluster(tmp_path / "emulator", "--state-dir", str(state)) as kubeconfig:
        api = connect(ConnectionSpec(kubeconfig=str(kubeconfig)))
        kube = Kube(api)
        try:
            child = spawn(["run", str(campaign), "--out", str(run_dir)], kubeconfig, tmp_path)
            treatment = next(iter(sorted(run_dir.glob("001__*"))), None)
            deadline = time.monotonic() + 120
            while treatment is None and time.monotonic() < deadline:
                time.sleep(0.1)
                treatment = next(iter(sorted(run_dir.glob("001__*"))), None)
            assert treatment is not None, child.communicate()[0]
            before = wait_for_records(treatment / "records.jsonl", 10, child)
            pods, _ = kube.list_objects("Pod", None, "testbed.io/run=probe-kill,testbed.io/probe")
            (pod,) = pods
            kube.delete("Pod", pod["metadata"]["name"], pod["metadata"]["namespace"])
            output, _ = child.communicate(timeout=180)
            assert child.returncode == 3, output
            summary = json.loads((treatment / "summary.json").read_text())
            assert summary["verdict"]["status"] == "ERROR"
            reason = summary["verdict"]["reason"]
            assert f"pod {pod['metadata']['name']} was deleted" in reason, reason
            kept = len(read_records(treatment / "records.jsonl"))
            assert before <= kept < 120
            assert f"{kept} record(s) arrived and are kept" in reason
            assert probe_leftovers(kube, "probe-kill") == []
            assert processes_under(state) == []

            resumed = run_cli(["run", "--resume", str(run_dir)], kubeconfig, tmp_path)
            assert resumed.returncode == 0, resumed.stdout + resumed.stderr
            summary = json.loads((treatment / "summary.json").read_text())
            assert_passed(summary)
            assert summary["attempt"] == 2
            assert len(read_records(treatment / "records.jsonl")) == summary["records"] == 120
            assert len(read_records(treatment / "attempts" / "1" / "records.jsonl")) == kept
            assert probe_leftovers(kube, "probe-kill") == []
            assert processes_under(state) == []
        finally:
            api.close()
