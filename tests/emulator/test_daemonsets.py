"""DaemonSets (apps/v1) against the emulator with kubectl and the official client: one pod
per matching node (nodeSelector, taints and tolerations), nodes joining and leaving the
selection, status counts, ``kubectl get ds`` / ``rollout status``, a rolling update that
never has more than ``maxUnavailable`` daemon pods unavailable, garbage collection."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client, watch

from tests.emulator.test_kubectl import Kubectl

pytestmark = pytest.mark.kubernetes

DAEMON = """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      nodeSelector: {LABEL: "yes"}
      containers: [{name: agent, image: "example.com/agent:1"}]
"""


@pytest.fixture
def setting(api: client.ApiClient, kubectl: Kubectl) -> Iterator[tuple[str, str, list[str]]]:
    """A namespace, a node label only this test uses, and the names of the real nodes."""
    tag = uuid.uuid4().hex[:8]
    namespace, label = f"ds-{tag}", f"testbed.io/ds-{tag}"
    kubectl.out("create", "namespace", namespace)
    nodes = [n.metadata.name for n in client.CoreV1Api(api).list_node().items]
    yield namespace, label, nodes
    kubectl.run("delete", "namespace", namespace, "--wait=false", ok=False)
    for node in nodes:
        kubectl.run("label", "node", node, f"{label}-", ok=False)


def _until(check: Callable[[], Any], what: str, seconds: float = 60) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _status(api: client.ApiClient, ns: str) -> Any:
    return client.AppsV1Api(api).read_namespaced_daemon_set_status("agent", ns).status


def _pods(api: client.ApiClient, ns: str) -> list[Any]:
    items = client.CoreV1Api(api).list_namespaced_pod(ns, label_selector="app=agent").items
    return [p for p in items if not p.metadata.deletion_timestamp]


def _settled(api: client.ApiClient, ns: str, desired: int) -> bool:
    status = _status(api, ns)
    return bool(
        status.desired_number_scheduled == desired
        and status.number_ready == desired
        and status.updated_number_scheduled == desired
        and len(_pods(api, ns)) == desired
    )


def test_one_pod_per_matching_node_rollout_and_gc(
    api: client.ApiClient, kubectl: Kubectl, setting: tuple[str, str, list[str]]
) -> None:
    ns, label, nodes = setting
    for node in nodes[:2]:
        kubectl.out("label", "node", node, f"{label}=yes")
    kubectl.out("apply", "-n", ns, "-f", "-", stdin=DAEMON.replace("LABEL", label))
    _until(lambda: _settled(api, ns, 2), "two daemon pods ready")
    pods = _pods(api, ns)
    assert sorted(p.spec.node_name for p in pods) == sorted(nodes[:2])
    (ref,) = pods[0].metadata.owner_references
    assert (ref.kind, ref.name, ref.controller) == ("DaemonSet", "agent", True)
    done = kubectl.out("rollout", "status", "-n", ns, "daemonset/agent", "--timeout=60s")
    assert 'daemon set "agent" successfully rolled out' in done
    table = kubectl.out("get", "ds", "-n", ns)
    assert table.split("\n")[0].split()[:7] == [
        "NAME",
        "DESIRED",
        "CURRENT",
        "READY",
        "UP-TO-DATE",
        "AVAILABLE",
        "NODE",
    ]
    assert table.split("\n")[1].split()[:6] == ["agent", "2", "2", "2", "2", "2"]

    # a third node joins the selection, then leaves it
    kubectl.out("label", "node", nodes[2], f"{label}=yes")
    _until(lambda: _settled(api, ns, 3), "a pod on the third node")
    kubectl.out("label", "node", nodes[2], f"{label}-")
    _until(lambda: _settled(api, ns, 2), "the third node's pod gone")
    assert nodes[2] not in {p.spec.node_name for p in _pods(api, ns)}

    # a rolling update never has more than maxUnavailable (1) daemon pods unavailable
    worst = _watch_unavailable(api, ns, 2)
    kubectl.out("set", "image", "-n", ns, "daemonset/agent", "agent=example.com/agent:2")
    kubectl.out("rollout", "status", "-n", ns, "daemonset/agent", "--timeout=60s")
    _until(lambda: _settled(api, ns, 2), "the update rolled out")
    assert {p.spec.containers[0].image for p in _pods(api, ns)} == {"example.com/agent:2"}
    assert worst() == 1  # one at a time: never zero (it moved), never two

    kubectl.out("delete", "-n", ns, "daemonset/agent")
    _until(lambda: not _pods(api, ns), "the daemon pods collected")


def _watch_unavailable(api: client.ApiClient, ns: str, desired: int) -> Callable[[], int]:
    """Follow the namespace's pods; the most daemon pods ever unavailable at once."""
    ready: dict[str, bool] = {}
    worst = [0]
    started = threading.Event()

    def follow() -> None:
        stream = watch.Watch()
        core = client.CoreV1Api(api)
        started.set()
        for event in stream.stream(core.list_namespaced_pod, ns, timeout_seconds=30):
            pod = event["object"]
            name = pod.metadata.name
            conditions = (pod.status and pod.status.conditions) or []
            is_ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
            gone = event["type"] == "DELETED" or pod.metadata.deletion_timestamp is not None
            if gone:
                ready.pop(name, None)
            else:
                ready[name] = is_ready
            worst[0] = max(worst[0], desired - sum(ready.values()))
            if sum(ready.values()) == desired and all(
                p.spec.containers[0].image.endswith(":2") for p in _pods(api, ns)
            ):
                stream.stop()

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    started.wait()
    time.sleep(0.5)  # the watch's initial ADDED events are in

    def result() -> int:
        thread.join(timeout=40)
        return worst[0]

    return result


def test_taints_need_tolerations(
    api: client.ApiClient, kubectl: Kubectl, setting: tuple[str, str, list[str]]
) -> None:
    ns, label, nodes = setting
    core = client.CoreV1Api(api)
    tainted = f"tainted-{label.rsplit('-', 1)[1]}"
    taint = {"key": "testbed.io/dedicated", "value": "x", "effect": "NoSchedule"}
    core.create_node(
        {"metadata": {"name": tainted, "labels": {label: "yes"}}, "spec": {"taints": [taint]}}
    )
    try:
        kubectl.out("label", "node", nodes[0], f"{label}=yes")
        kubectl.out("apply", "-n", ns, "-f", "-", stdin=DAEMON.replace("LABEL", label))
        _until(lambda: _settled(api, ns, 1), "one pod: the tainted node is left out")
        tolerate = {"tolerations": [{"key": "testbed.io/dedicated", "operator": "Exists"}]}
        client.AppsV1Api(api).patch_namespaced_daemon_set(
            "agent", ns, {"spec": {"template": {"spec": tolerate}}}
        )
        _until(
            lambda: (
                _status(api, ns).desired_number_scheduled == 2
                and tainted in {p.spec.node_name for p in _pods(api, ns)}
            ),
            "a pod on the tainted node once tolerated",
        )
    finally:
        core.delete_node(tainted)
    _until(lambda: _status(api, ns).desired_number_scheduled == 1, "the node gone")
