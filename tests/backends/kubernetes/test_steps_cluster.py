"""Steps on a cluster: the TOPSAIL example runs with its steps against the cluster (kubectl
with the run's KUBECONFIG and NAMESPACE, the run's objects, events and logs captured as
kubectl shows them, nothing left after); execution.keep leaves the workers running and
`testbed cleanup` removes them, running the final cleanup steps the run skipped."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from testbed.clients.kube import Kube
from tests.backends.kubernetes.conftest import leftovers, run_cli
from tests.execution.test_steps_example import TOPSAIL_STEPS

pytestmark = [pytest.mark.kubernetes, pytest.mark.cluster, pytest.mark.slow]
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "topsail-presets.yaml"


def test_the_topsail_example_runs_its_steps_on_the_cluster(
    tmp_path: Path, kubeconfig: Path, kube: Kube
) -> None:
    stack = f"stack-{uuid.uuid4().hex[:6]}"  # an operator's namespace, dumped whole
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": stack}})
    kube.create(
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "operator-config", "namespace": stack}, "data": {"a": "b"}}
    )  # fmt: skip
    try:
        done = run_cli(
            ["run", str(EXAMPLE), "--preset", "smoke", "--preset", "gpu-pool",
             "--set", "backend.kind=kubernetes", "--out", str(tmp_path / "k8s-steps"),
             "--set", f"execution.capture.namespaces=[{stack}]"],
            kubeconfig, tmp_path, 600,
        )  # fmt: skip
    finally:
        kube.delete("Namespace", stack)
    assert done.returncode == 0, done.stdout + done.stderr
    run = tmp_path / "k8s-steps"
    steps = sorted(p.name for p in (run / "steps").iterdir() if p.is_dir())
    assert steps == TOPSAIL_STEPS
    # the named command ran kubectl against the run's cluster with the preset's value
    nodes = (run / "steps/003__prepare__label-nodes/nodes.txt").read_text().splitlines()
    assert nodes[0].split()[-1] == "POOL"
    assert all(line.split()[-1] == "a100" for line in nodes[1:]), nodes
    step = json.loads((run / "steps/003__prepare__label-nodes/step.json").read_text())
    assert step["command"] == "sutest/cluster.label_nodes"
    assert step["args"] == {"key": "topsail.example/pool", "value": "a100", "dry_run": False}
    # and the final cleanup took the label off again
    assert all("topsail.example/pool" not in n["metadata"].get("labels", {})
               for n in kube.list_objects("Node")[0])  # fmt: skip
    # state around each treatment, as kubectl shows it: the worker's pod Running, its log
    treatment = next(run.glob("001__*"))
    table = (treatment / "state-before/get.txt").read_text()
    assert "NAME (pod)" in table, table
    assert "Running" in table, table
    events = (treatment / "state-after/events.txt").read_text()
    assert "Scheduled" in events
    logs = list((treatment / "state-after/logs").glob("*/server.log"))
    assert len(logs) == 1
    assert "kind: List" in (treatment / "state-after/objects.yaml").read_text()
    operator = (treatment / f"state-before/namespace-{stack}/get.txt").read_text()
    assert "operator-config" in operator, operator
    assert leftovers(kube, "k8s-steps") == []


def test_keep_leaves_the_workers_until_testbed_cleanup(
    tmp_path: Path, kubeconfig: Path, kube: Kube
) -> None:
    campaign = tmp_path / "keep.yaml"
    campaign.write_text(
        f"""\
name: keep
backend: kubernetes
deployments: [{{name: sim, server: sim, params: {{ttft_ms: 2}}}}]
load: {{requests: 4, dataset: {{kind: synthetic, input_tokens: 8, output_tokens: 4}}}}
steps:
  final_cleanup:
    - {{name: uninstall, run: [touch, "{tmp_path}/uninstalled"]}}
execution: {{keep: true}}
"""
    )
    run = tmp_path / "k8s-keep"
    done = run_cli(["run", str(campaign), "--out", str(run)], kubeconfig, tmp_path, 600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"testbed cleanup {run}" in done.stdout
    kept = leftovers(kube, "k8s-keep")
    assert any(item.startswith("Pod/") for item in kept), kept
    assert not (tmp_path / "uninstalled").exists()
    cleaned = run_cli(["cleanup", str(run)], kubeconfig, tmp_path, 300)
    assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
    assert (tmp_path / "uninstalled").exists()  # the final cleanup step the run skipped
    assert leftovers(kube, "k8s-keep") == []
