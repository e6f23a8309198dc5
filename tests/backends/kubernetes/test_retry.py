"""A worker's retry on Kubernetes follows its own pod, and every death says why (issue 26).

- Readiness follows the pods of the Deployment it applied (by ReplicaSet and uid), not any
  pod with the worker's labels: another Deployment's pod with those labels, crashing, does
  not fail the worker (a retry's Deployment meets exactly that: the last attempt's pod,
  Terminating, still reporting its failure).
- End to end: a server that crashes a few seconds after it is ready (the emulator's
  ``crash`` fault with ``fault-after``) under a load longer than that; the first attempt
  dies, the retry serves on a new pod and dies the same way; each attempt's ERROR names its
  own pod, its exit, and its server's last log lines, and the final one also the first's.
- A server that printed nothing before it died is said to have printed nothing.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed.backends.kubernetes import manifests
from testbed.backends.kubernetes.backend import KubernetesBackend
from testbed.backends.kubernetes.launch import server_launch
from testbed.backends.kubernetes.podstate import PodState
from testbed.backends.kubernetes.readiness import SILENT, explain
from testbed.clients.kube import Kube
from testbed.config.backend_settings import KubernetesSettings
from testbed.config.deployments import Placement, ServerDeployment
from testbed.config.loader import load_campaign_text
from testbed.execution.single import resolved_deployment
from tests.backends.kubernetes.conftest import leftovers, run_cli
from tests.backends.kubernetes.test_e2e import SIM_CAMPAIGN, summaries

CRASH = {"emulator.testbed.io/fault": "crash", "emulator.testbed.io/fault-after": "0.2"}


def _failing_decoy(
    kube: Kube, backend: KubernetesBackend, worker_id: str, config: ServerDeployment
) -> str:
    """Another Deployment whose pods carry the worker's labels and crash at once; the name
    of its pod once the cluster reports it failed (CrashLoopBackOff)."""
    decoy = config.model_copy(update={"placement": Placement(pod_annotations=CRASH)})
    launch = server_launch(decoy, backend.settings)
    deployment = manifests.worker(backend.run_id, worker_id, launch, backend.namespace)[0]
    deployment["metadata"]["name"] = "tb-decoy"
    kube.apply(deployment)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pods, _ = kube.list_objects("Pod", backend.namespace)
        for pod in pods:
            statuses = pod.get("status", {}).get("containerStatuses") or []
            waiting = [(s.get("state") or {}).get("waiting") or {} for s in statuses]
            if any(w.get("reason") == "CrashLoopBackOff" for w in waiting):
                return str(pod["metadata"]["name"])
        time.sleep(0.1)
    raise AssertionError("the decoy's pod never reached CrashLoopBackOff")


@pytest.mark.kubernetes
async def test_readiness_ignores_a_failing_pod_of_another_deployment_with_the_workers_labels(
    tmp_path: Path, cluster_kubeconfig: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(cluster_kubeconfig))
    text = json.dumps({**SIM_CAMPAIGN, "name": "lineage"})
    worker_id, config = resolved_deployment(load_campaign_text(text, "c.yaml"), "sim")
    run_dir = tmp_path / "k8s-lineage"
    run_dir.mkdir()
    backend = KubernetesBackend(run_dir, KubernetesSettings.model_validate(SIM_CAMPAIGN["backend"]))
    kube = await backend.kube()
    try:
        await backend.prepare([config])
        decoy = await asyncio.to_thread(_failing_decoy, kube, backend, worker_id, config)
        assert decoy.startswith("tb-decoy-")
        async with backend.provision(worker_id, config, tmp_path / "worker") as handle:
            assert handle.info["pod"].startswith(manifests.worker_name(worker_id) + "-")
            assert not handle.died.done()
    finally:
        await backend.cleanup_leftovers(run_dir)
    assert await asyncio.to_thread(leftovers, kube, "k8s-lineage") == []


@pytest.mark.kubernetes
@pytest.mark.cluster
def test_the_retry_serves_on_its_own_pod_and_each_death_says_why(
    tmp_path: Path, kubeconfig: Path, kube: Kube
) -> None:
    # The server runs 4 s, enough to become ready and serve, then exits 1 (and again after
    # each restart); the load lasts longer, so each attempt is cut by the crash.
    data = json.loads(json.dumps(SIM_CAMPAIGN))
    data["deployments"][0]["placement"] = {
        "pod_annotations": {**CRASH, "emulator.testbed.io/fault-after": "4"}
    }
    data["execution"] = {"retries": 1}
    data["load"] = {
        "profile": "rate",
        "rate": 5,
        "duration_s": 30,
        "dataset": {"kind": "synthetic", "input_tokens": 16, "output_tokens": 8},
    }
    campaign = tmp_path / "campaign.yaml"
    campaign.write_text(yaml.safe_dump(data))
    run_dir = tmp_path / "k8s-retry"
    result = run_cli(["run", str(campaign), "--out", str(run_dir)], kubeconfig, tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    (summary,) = summaries(run_dir)
    (first_file,) = run_dir.glob("*/attempts/1/summary.json")
    first = json.loads(first_file.read_text())["verdict"]["reason"]
    last = summary["verdict"]["reason"]
    assert summary["attempt"] == 2, summary
    pods = []
    for reason in (first, last):
        assert reason.startswith("server lost during the probe: pod tb-sim-"), reason
        assert "exited with code 1 (Error)" in reason, reason
        assert "while serving; last 30 log lines of server:\ntestbed sim listening" in reason
        pods.append(reason.split(" pod ", 1)[1].split(" ", 1)[0])
    assert pods[0] != pods[1], "the retry reported the first attempt's pod"
    # the final ERROR also says how the first attempt ended, with its own pod
    assert f"; the first attempt ended: server lost during the probe: pod {pods[0]} " in last
    assert leftovers(kube, "k8s-retry") == []


class _SilentKube:
    """The two log reads ``explain`` makes, of a server that printed nothing."""

    def pod_log(self, *args: Any, **kwargs: Any) -> str:
        return ""


def test_a_server_that_printed_nothing_is_said_to_have() -> None:
    pod = {"metadata": {"name": "tb-sim-1-abc"}}
    manifest = {"spec": {"template": {"spec": {"containers": [{"name": "server"}]}}}}
    state = PodState("failed", "CrashLoopBackOff", "exit code 1", "server")
    text = explain(_SilentKube(), "ns", pod, state, manifest)  # type: ignore[arg-type]
    assert text == f"CrashLoopBackOff: exit code 1; {SILENT}"
