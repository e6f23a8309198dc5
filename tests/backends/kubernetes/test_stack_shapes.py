"""The shapes charts really use, on a cluster (the emulator, or ``$KUBECONFIG``'s): a
StatefulSet stack and a LeaderWorkerSet stack ready by what their kinds publish (no
condition named), and a crash-looping stack that fails well inside its one ready timeout
with the pod's reason and log lines, its pods' logs kept in the run folder — and is not
started again, since a fresh start loops the same way."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed.clients.kube import Kube
from tests.backends.kubernetes.conftest import run_cli
from tests.backends.kubernetes.test_stacks import stack_campaign, stack_left, summaries
from tests.verdicts import assert_passed

pytestmark = [pytest.mark.kubernetes, pytest.mark.cluster]

#: The simulator's container, as a flow sequence (it goes into three templates)
SERVER = (
    '[{name: server, image: "testbed:stack", ports: [{name: http, containerPort: 8000}],'
    ' args: [serve, sim, --port, "8000", --host, 0.0.0.0, --set, ttft_ms=5,'
    ' --set, "model_name={{ deployment.model }}"],'
    " readinessProbe: {httpGet: {path: /health, port: http}, periodSeconds: 1}}]"
)
SERVICE = """
apiVersion: v1
kind: Service
metadata: {name: sim-server}
spec:
  selector: {app: sim-server}
  ports: [{name: web, port: 80, targetPort: http}]
"""
STATEFULSET = f"""
apiVersion: v1
kind: Service
metadata: {{name: sim-peers}}
spec: {{clusterIP: None, selector: {{app: sim-server}}, ports: [{{port: 8000}}]}}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: sim-server}}
spec:
  serviceName: sim-peers
  replicas: 2
  selector: {{matchLabels: {{app: sim-server}}}}
  template:
    metadata: {{labels: {{app: sim-server}}}}
    spec:
      containers: {SERVER}
---{SERVICE}"""
LWS = f"""
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {{name: sim-group}}
spec:
  replicas: 1
  leaderWorkerTemplate:
    size: 2
    leaderTemplate:
      metadata: {{labels: {{app: sim-server}}}}
      spec:
        containers: {SERVER}
    workerTemplate:
      metadata: {{labels: {{role: worker}}}}
      spec:
        containers: {SERVER}
---{SERVICE}"""
CRASHING = (
    """
apiVersion: apps/v1
kind: Deployment
metadata: {name: sim-server}
spec:
  selector: {matchLabels: {app: sim-server}}
  template:
    metadata: {labels: {app: sim-server}}
    spec:
      containers:
        - name: server
          image: testbed:stack
          args: [serve, sim, --port, "8000", --set, "no_such_setting=1"]
          ports: [{name: http, containerPort: 8000}]
          readinessProbe: {httpGet: {path: /health, port: http}, periodSeconds: 1}
---"""
    + SERVICE
)


def _stack(folder: Path, text: str) -> Path:
    stack = folder / "stack"
    stack.mkdir()
    (stack / "stack.yaml").write_text(text)
    return stack


def _run(
    tmp_path: Path,
    kubeconfig: Path,
    name: str,
    text: str,
    ready: list[Any],
    retries: int | None = 0,
) -> Any:
    """``testbed run`` of a stack of ``text``; ``retries`` None: execution's default."""
    campaign = stack_campaign(tmp_path, manifests=_stack(tmp_path, text), ready=ready,
                              values={}, metrics=None)  # fmt: skip
    data = yaml.safe_load(campaign.read_text())
    data["deployments"][0].pop("metrics")
    if retries is None:
        data.pop("execution")
    else:
        data["execution"] = {"retries": retries}
    campaign.write_text(yaml.safe_dump(data))
    run_dir = tmp_path / name
    started = time.monotonic()
    result = run_cli(["run", str(campaign), "--out", str(run_dir)], kubeconfig, tmp_path)
    return result, run_dir, time.monotonic() - started


def test_a_statefulset_stack_is_ready_by_its_own_status(
    tmp_path: Path, kubeconfig: Path, kube: Kube
) -> None:
    ready = [{"kind": "StatefulSet", "name": "sim-server", "timeout_s": 90}]
    result, run_dir, _ = _run(tmp_path, kubeconfig, "stack-sts", STATEFULSET, ready)
    assert result.returncode == 0, result.stdout + result.stderr
    (summary,) = summaries(run_dir)
    assert_passed(summary)
    logs = sorted(p.name for p in run_dir.rglob("pods/*.server.log"))
    assert logs == ["sim-server-0.server.log", "sim-server-1.server.log"]
    assert stack_left(kube, "stack-sts") == []


def test_a_leaderworkerset_stack_is_ready_by_its_own_status(
    tmp_path: Path, kubeconfig: Path, kube: Kube
) -> None:
    # LWS makes a headless Service named as the set: the stack's own Service is another
    ready = [{"kind": "LeaderWorkerSet", "name": "sim-group", "timeout_s": 90}]
    result, run_dir, _ = _run(tmp_path, kubeconfig, "stack-lws", LWS, ready)
    assert result.returncode == 0, result.stdout + result.stderr
    (summary,) = summaries(run_dir)
    assert_passed(summary)
    # the leader and its worker, by the names LWS gives them
    logs = sorted(p.name for p in run_dir.rglob("pods/*.server.log"))
    assert logs == ["sim-group-0-1.server.log", "sim-group-0.server.log"]
    assert stack_left(kube, "stack-lws") == []


def test_a_crash_looping_stack_fails_fast_with_the_pods_reason_and_log(
    tmp_path: Path, kubeconfig: Path, kube: Kube
) -> None:
    """The simulator refuses an unknown setting and exits: CrashLoopBackOff. The wait ends
    at the second restart — far inside the 300 s ready timeout — saying the pod, the reason
    and the server's last words; the pod's logs stay in the run folder."""
    ready = [{"kind": "Deployment", "name": "sim-server", "timeout_s": 300}]
    result, run_dir, took = _run(tmp_path, kubeconfig, "stack-crash", CRASHING, ready)
    assert result.returncode == 3, result.stdout + result.stderr
    assert took < 120, f"took {took:.0f} s"
    (summary,) = summaries(run_dir)
    reason = summary["verdict"]["reason"]
    assert summary["verdict"]["status"] == "ERROR"
    assert "CrashLoopBackOff" in reason, reason
    assert "pod sim-server-" in reason, reason
    assert "no_such_setting" in reason, reason  # the server's own words, from its log
    assert "timeout" not in reason
    kept = list(run_dir.rglob("pods/sim-server-*.server*.log"))
    assert any("no_such_setting" in p.read_text() for p in kept), json.dumps([str(p) for p in kept])
    assert stack_left(kube, "stack-crash") == []


def test_a_crash_loop_is_not_retried(tmp_path: Path, kubeconfig: Path, kube: Kube) -> None:
    """With the default execution.retries (1): a fresh start runs the same image with the
    same arguments and loops the same way, so the treatment ERRORs after ONE wait, and the
    reason says why there was no retry (issue 32)."""
    ready = [{"kind": "Deployment", "name": "sim-server", "timeout_s": 300}]
    result, run_dir, took = _run(tmp_path, kubeconfig, "stack-loop", CRASHING, ready, retries=None)
    assert result.returncode == 3, result.stdout + result.stderr
    (summary,) = summaries(run_dir)
    reason = summary["verdict"]["reason"]
    assert summary["verdict"]["status"] == "ERROR"
    assert "CrashLoopBackOff" in reason, reason
    said = "(container server restarted 2 times) — not retried: a fresh start runs the same image"
    assert said in reason, reason
    assert "the first attempt ended" not in reason, reason
    assert "retrying" not in result.stdout, result.stdout
    # one start made one pod (a retry makes another Deployment, another pod name)
    pods = {p.name.split(".")[0] for p in run_dir.rglob("pods/sim-server-*.log")}
    assert len(pods) == 1, pods
    assert took < 120, f"took {took:.0f} s"
    assert stack_left(kube, "stack-loop") == []
