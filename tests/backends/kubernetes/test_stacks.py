"""Stacks (``server: manifests``) end to end on a cluster (the emulator, or ``$KUBECONFIG``'s):
a Deployment + Service of the simulator passes load, a matrix over ``values`` renders and
runs distinct objects one after the other, a CRD of the stack is applied before the custom
object that needs it, the cluster's refusals and a workload that gives up are ERRORs with
the cluster's words, and nothing of a run is left afterwards — success, failure, SIGKILL +
``testbed cleanup``."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed.clients.kube import Kube
from tests.backends.kubernetes.conftest import leftovers, run_cli, spawn

pytestmark = [pytest.mark.kubernetes, pytest.mark.cluster]

STACK = Path(__file__).parent / "stacks" / "sim"


def stack_campaign(folder: Path, manifests: Path = STACK, **changes: Any) -> Path:
    data: dict[str, Any] = {
        "name": "stack",
        "backend": {"kind": "kubernetes"},
        "deployments": [
            {
                "name": "sim",
                "server": "manifests",
                "manifests": str(manifests),
                "model": "stacked-sim",
                "values": {"ttft_ms": 5},
                "ready": [
                    {"kind": "Deployment", "name": "sim-server", "condition": "Available",
                     "timeout_s": 90}
                ],
                "endpoint": {"service": "sim-server", "port": "web"},
                "metrics": {"service": "sim-server", "port": 80},
            }
        ],
        "load": {
            "profile": "concurrency",
            "concurrency": 2,
            "requests": 8,
            "dataset": {"kind": "synthetic", "input_tokens": 8, "output_tokens": 4},
            "slo": {"ttft_p99_ms": 5000},
        },
        "execution": {"retries": 0},
    }  # fmt: skip
    for key, value in changes.items():
        if key in ("matrix",):
            data[key] = value
        else:
            data["deployments"][0][key] = value
    path = folder / "campaign.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def summaries(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(run_dir.glob("*/summary.json"))]


def stack_left(kube: Kube, run_id: str) -> list[str]:
    """The run's objects of any kind the stack makes, its CRD included."""
    left = leftovers(kube, run_id)
    crd = kube.request("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "list")
    for item in json.loads(crd.data)["items"]:
        if (item["metadata"].get("labels") or {}).get("testbed.io/run") == run_id:
            left.append(f"CustomResourceDefinition/{item['metadata']['name']}")
    return left


def test_a_stack_over_a_values_matrix_passes_load_and_leaves_nothing(
    tmp_path: Path, kubeconfig: Path, kube: Kube
) -> None:
    matrix = {"factors": {"deployments.sim.values.ttft_ms": [5, 40]}}
    campaign = stack_campaign(tmp_path, matrix=matrix)
    run_dir = tmp_path / "stack-pass"
    result = run_cli(["run", str(campaign), "--out", str(run_dir)], kubeconfig, tmp_path, 400)
    assert result.returncode == 0, result.stdout + result.stderr
    found = summaries(run_dir)
    assert [s["verdict"]["status"] for s in found] == ["PASS", "PASS"]
    assert all(s["records"] == 8 for s in found)
    # Each treatment ran its own rendering: the factor's level is in its Deployment's args.
    rendered = {}
    for stack_file in sorted(run_dir.glob("workers/*/stack.yaml")):
        objects = list(yaml.safe_load_all(stack_file.read_text()))
        kinds = [o["kind"] for o in objects]
        assert kinds == ["Widget", "CustomResourceDefinition", "Deployment", "Service"]
        deployment = objects[2]
        args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        rendered[stack_file.parent.name] = next(a for a in args if a.startswith("ttft_ms="))
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert labels["testbed.io/run"] == "stack-pass"
        assert labels["app"] == "sim-server"  # the stack's own labels are kept
    assert sorted(rendered.values()) == ["ttft_ms=40", "ttft_ms=5"]
    # The TTFT the simulator was told shows in what the probe measured.
    p50 = {s["params"]["deployments.sim.values.ttft_ms"]: s["ttft_ms"]["p50"] for s in found}
    assert p50[40] > p50[5] + 20
    assert found[0]["server_metrics"]["deployments"]  # scraped from the metrics Service
    assert stack_left(kube, "stack-pass") == []


def test_a_workload_that_gives_up_is_an_error_with_its_own_message(
    tmp_path: Path, kubeconfig: Path, kube: Kube
) -> None:
    # The image is never pulled; the Deployment's progress deadline passes and its
    # controller says so: Progressing=False, ProgressDeadlineExceeded, with its message.
    values = {"ttft_ms": 5, "progress_deadline_s": 2,
              "pod_annotations": {"emulator.testbed.io/fault": "image-pull"}}  # fmt: skip
    campaign = stack_campaign(tmp_path, values=values)
    run_dir = tmp_path / "stack-stuck"
    result = run_cli(["run", str(campaign), "--out", str(run_dir)], kubeconfig, tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    (summary,) = summaries(run_dir)
    reason = summary["verdict"]["reason"]
    assert summary["verdict"]["status"] == "ERROR"
    assert "Deployment/sim-server to be Available" in reason
    assert "ProgressDeadlineExceeded" in reason
    assert stack_left(kube, "stack-stuck") == []


def test_a_kind_the_cluster_does_not_serve_is_an_error_in_its_words(
    tmp_path: Path, kubeconfig: Path, kube: Kube
) -> None:
    stack = tmp_path / "stack"
    stack.mkdir()
    (stack / "server.yaml").write_text((STACK / "server.yaml").read_text())
    (stack / "thing.yaml").write_text(
        "apiVersion: nowhere.example.com/v1\nkind: Gizmo\nmetadata: {name: g}\n"
    )
    campaign = stack_campaign(tmp_path, manifests=stack)
    run_dir = tmp_path / "stack-unserved"
    result = run_cli(["run", str(campaign), "--out", str(run_dir)], kubeconfig, tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    (summary,) = summaries(run_dir)
    assert "thing.yaml:1: Gizmo/g: the cluster serves no Gizmo" in summary["verdict"]["reason"]
    assert stack_left(kube, "stack-unserved") == []


def test_a_sigkilled_stack_run_is_removed_by_testbed_cleanup(
    tmp_path: Path, kubeconfig: Path, kube: Kube
) -> None:
    # Never scheduled: the run waits for readiness until it is killed.
    values = {
        "ttft_ms": 5,
        "pod_annotations": {
            "emulator.testbed.io/fault": "slow-schedule",
            "emulator.testbed.io/schedule-delay": "600",
        },
    }
    campaign = stack_campaign(tmp_path, values=values)
    run_dir = tmp_path / "stack-killed"
    child = spawn(["run", str(campaign), "--out", str(run_dir)], kubeconfig, tmp_path)
    deadline = time.monotonic() + 90
    while not kube.list_objects("Service", None, "testbed.io/run=stack-killed")[0]:
        assert time.monotonic() < deadline, "the stack's Service never appeared"
        assert child.poll() is None, child.communicate()[0]
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=60)
    assert "CustomResourceDefinition/widgets.stacks.testbed.io" in stack_left(kube, "stack-killed")
    result = run_cli(["cleanup", str(run_dir)], kubeconfig, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "deleted Widget/sim-widget" in result.stdout
    assert "deleted CustomResourceDefinition/widgets.stacks.testbed.io" in result.stdout
    assert stack_left(kube, "stack-killed") == []
