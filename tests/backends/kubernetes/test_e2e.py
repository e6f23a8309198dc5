"""The Kubernetes backend end to end: ``testbed run`` against a cluster (the emulator, or
``$KUBECONFIG``'s), its verdicts and exit codes, the cluster's failures as ERRORs with their
reasons, and nothing of a run left in the API afterwards — after success, failure, Ctrl-C."""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed.clients.kube import Kube
from testbed.core.errors import EXIT_NOTHING_TESTED
from tests.backends.kubernetes.conftest import (
    await_object,
    kubectl_get_all,
    leftovers,
    run_cli,
    slow_schedule,
    spawn,
)
from tests.verdicts import assert_passed

pytestmark = [pytest.mark.kubernetes, pytest.mark.cluster]

SIM_CAMPAIGN: dict[str, Any] = {
    "name": "k8s-sim",
    "backend": {"kind": "kubernetes", "ready_timeout_s": 60, "scheduled_timeout_s": 30},
    "deployments": [{"name": "sim", "server": "sim", "params": {"ttft_ms": 5, "itl_ms": 2}}],
    "load": {
        "profile": "concurrency",
        "concurrency": 2,
        "requests": 12,
        "dataset": {"kind": "synthetic", "input_tokens": 16, "output_tokens": 8},
        "slo": {"ttft_p99_ms": 5000},
    },
    "execution": {"retries": 0},
}


def write_campaign(folder: Path, **changes: Any) -> Path:
    data = json.loads(json.dumps(SIM_CAMPAIGN))
    deployment = data["deployments"][0]
    for key, value in changes.items():
        deployment[key] = value
    path = folder / "campaign.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def summaries(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(run_dir.glob("*/summary.json"))]


def test_a_load_campaign_passes_and_leaves_nothing(
    tmp_path: Path, kubeconfig: Path, kube: Kube
) -> None:
    campaign = write_campaign(tmp_path)
    run_dir = tmp_path / "k8s-pass"
    result = run_cli(["run", str(campaign), "--out", str(run_dir)], kubeconfig, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    (summary,) = summaries(run_dir)
    assert_passed(summary)
    assert summary["records"] == 12
    worker = summary["workers"][0]
    assert worker["namespace"] == "testbed-k8s-pass"
    assert worker["pod"].startswith("tb-sim-")
    assert leftovers(kube, "k8s-pass") == []
    assert kubectl_get_all(kubeconfig, "k8s-pass") == "No resources found"


FAULTS = [
    ({"emulator.testbed.io/fault": "image-pull"}, {}, r"(ErrImagePull|ImagePullBackOff)"),
    (
        {"emulator.testbed.io/fault": "crash", "emulator.testbed.io/fault-after": "0.2"},
        {},
        r"CrashLoopBackOff.*exit code 1",
    ),
    (
        {"emulator.testbed.io/fault": "oom", "emulator.testbed.io/fault-after": "0.2"},
        {},
        r"OOMKilled.*limit 32Gi",
    ),
    # Nodes exist that are big enough, but none the scheduler may use: its own message.
    (
        {},
        {"node_selector": {"testbed.io/pool": "nowhere"}},
        r"Unschedulable: 0/\d+ nodes are available.*requested cpu 1, memory 8Gi",
    ),
]


@pytest.mark.parametrize(
    ("annotations", "placement", "reason"), FAULTS, ids=["pull", "crash", "oom", "unschedulable"]
)
def test_cluster_failures_are_errors_with_the_clusters_reason(
    tmp_path: Path,
    kubeconfig: Path,
    kube: Kube,
    annotations: dict[str, str],
    placement: dict[str, Any],
    reason: str,
) -> None:
    campaign = write_campaign(tmp_path, placement={"pod_annotations": annotations, **placement})
    run_id = f"k8s-fault-{len(reason)}-{len(annotations)}"
    run_dir = tmp_path / run_id
    result = run_cli(["run", str(campaign), "--out", str(run_dir)], kubeconfig, tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    (summary,) = summaries(run_dir)
    assert summary["verdict"]["status"] == "ERROR"
    assert re.search(reason, summary["verdict"]["reason"], re.S), summary["verdict"]["reason"]
    assert leftovers(kube, run_id) == []


def test_a_worker_no_node_can_hold_is_skipped_with_the_numbers(
    tmp_path: Path, kubeconfig: Path, kube: Kube
) -> None:
    campaign = write_campaign(tmp_path, resources={"cpu": 1, "memory_gb": 8, "gpu": 640})
    run_dir = tmp_path / "k8s-too-big"
    result = run_cli(["run", str(campaign), "--out", str(run_dir)], kubeconfig, tmp_path)
    # its one treatment skipped: nothing was tested, which is not a green run
    assert result.returncode == EXIT_NOTHING_TESTED, result.stdout + result.stderr
    (summary,) = summaries(run_dir)
    assert summary["verdict"]["status"] == "SKIPPED"
    assert re.search(r"nvidia.com/gpu 640 > \d+", summary["verdict"]["reason"])
    assert leftovers(kube, "k8s-too-big") == []


@pytest.mark.slow
def test_sigint_during_readiness_leaves_nothing_20_times(
    tmp_path: Path, kubeconfig: Path, kube: Kube
) -> None:
    # A pod that is never scheduled: testbed waits in readiness until it is interrupted.
    # Four runs at a time (distinct run ids): most of a trial is the CLI's own start and exit.
    campaign = write_campaign(tmp_path, placement=slow_schedule("600"))
    for batch in range(5):
        run_ids = [f"k8s-sigint-{batch}-{i}" for i in range(4)]
        children = {
            run_id: spawn(
                ["run", str(campaign), "--out", str(tmp_path / run_id)], kubeconfig, tmp_path
            )
            for run_id in run_ids
        }
        for run_id, child in children.items():
            await_object(kube, "Deployment", run_id, child)
            child.send_signal(signal.SIGINT)
        for run_id, child in children.items():
            output, _ = child.communicate(timeout=120)
            assert child.returncode == 130, output
            assert leftovers(kube, run_id) == [], run_id


def interrupt_in_readiness(child: Any, kube: Kube, run_id: str, signum: int) -> str:
    await_object(kube, "Deployment", run_id, child)
    child.send_signal(signum)
    output, _ = child.communicate(timeout=120)
    return str(output)


def test_sigkilled_run_is_cleaned_by_testbed_cleanup(
    tmp_path: Path, kubeconfig: Path, kube: Kube
) -> None:
    campaign = write_campaign(tmp_path, placement=slow_schedule("600"))
    run_dir = tmp_path / "k8s-killed"
    child = spawn(["run", str(campaign), "--out", str(run_dir)], kubeconfig, tmp_path)
    interrupt_in_readiness(child, kube, "k8s-killed", signal.SIGKILL)
    assert leftovers(kube, "k8s-killed")  # a SIGKILLed run cannot clean up after itself
    result = run_cli(["cleanup", str(run_dir)], kubeconfig, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "deleted Deployment/tb-sim-" in result.stdout
    assert leftovers(kube, "k8s-killed") == []


def test_resume_recreates_the_workers_of_an_interrupted_run(
    tmp_path: Path, kubeconfig: Path, kube: Kube
) -> None:
    # Scheduled after 10 s: the first attempt is interrupted before (the interrupt follows the
    # Deployment's creation by far less, even on a loaded machine), the resumed one serves.
    campaign = write_campaign(tmp_path, placement=slow_schedule("10"))
    run_dir = tmp_path / "k8s-resume"
    child = spawn(["run", str(campaign), "--out", str(run_dir)], kubeconfig, tmp_path)
    output = interrupt_in_readiness(child, kube, "k8s-resume", signal.SIGINT)
    assert child.returncode == 130, output
    assert summaries(run_dir) == []
    result = run_cli(["run", "--resume", str(run_dir)], kubeconfig, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    (summary,) = summaries(run_dir)
    assert_passed(summary)
    assert leftovers(kube, "k8s-resume") == []
