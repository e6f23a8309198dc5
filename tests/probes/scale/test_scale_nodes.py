"""`testbed scale nodes`: KWOK-style fake GPU nodes created and deleted through the API."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from testbed.clients.kube.connection import ConnectionSpec
from testbed.clients.kube.rest import Kube
from testbed.probes.scale.kwok import NODE_LABEL, node

pytestmark = pytest.mark.kubernetes


def test_node_is_what_kwok_manages() -> None:
    body = node("kwok-gpu-0001", gpus=8, cpu=64, memory_gi=512, pods=110)
    assert body["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    assert body["metadata"]["labels"]["type"] == "kwok"
    assert body["spec"]["taints"] == [
        {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}
    ]
    assert body["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert (
        "nvidia.com/gpu" not in node("n", gpus=0, cpu=1, memory_gi=1, pods=1)["status"]["capacity"]
    )


@pytest.mark.slow
def test_nodes_command_creates_and_deletes(cluster_kubeconfig: Path) -> None:
    base = [
        sys.executable,
        "-m",
        "testbed",
        "scale",
        "nodes",
        "--kubeconfig",
        str(cluster_kubeconfig),
    ]
    made = subprocess.run(
        [*base, "--count", "3", "--gpus", "4", "--prefix", "kwok-t"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    assert "3 KWOK node(s) with 4 GPU(s) each created, 0 existed" in made.stdout
    again = subprocess.run(
        [*base, "--count", "3", "--gpus", "4", "--prefix", "kwok-t"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert "0 KWOK node(s) with 4 GPU(s) each created, 3 existed" in again.stdout
    kube = Kube.connect(ConnectionSpec(kubeconfig=str(cluster_kubeconfig)))
    items, _ = kube.list_objects("Node", None, f"{NODE_LABEL}=true")
    assert sorted(i["metadata"]["name"] for i in items) == [
        "kwok-t-0000",
        "kwok-t-0001",
        "kwok-t-0002",
    ]
    assert all(i["status"]["capacity"]["nvidia.com/gpu"] == "4" for i in items)
    gone = subprocess.run([*base, "--delete"], capture_output=True, text=True, check=False)
    assert "3 node(s) deleted" in gone.stdout
    assert kube.list_objects("Node", None, f"{NODE_LABEL}=true")[0] == []
