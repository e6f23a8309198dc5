"""Fake GPU nodes for a cluster that runs KWOK (``testbed scale nodes --count 1000 --gpus 8``).

KWOK takes charge of Node objects annotated ``kwok.x-k8s.io/node: fake``: it keeps them Ready
and moves the pods bound to them through their stages. The nodes carry KWOK's own labels
(``type: kwok``) and taint (``kwok.x-k8s.io/node=fake:NoSchedule``, so real pods stay off
them; testbed's templates tolerate it), and the capacity given here, ``nvidia.com/gpu``
included — as the fake GPU operator would advertise it. Status is written on create and
again through the status subresource, because some API servers drop it on create.
The emulator (``testbed cluster emulate --nodes N --gpus-per-node G``) makes its own.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kubefacts.gpu import GPU, GPU_PRESENT_LABEL
from testbed.clients.kube.rest import Kube
from testbed.core.errors import ClusterConflict, TestbedError

NODE_LABEL = "testbed.io/scale-node"


def node(name: str, gpus: int, cpu: int, memory_gi: int, pods: int) -> dict[str, Any]:
    """One KWOK node with GPU capacity, as KWOK's documentation writes them."""
    capacity = {"cpu": str(cpu), "memory": f"{memory_gi}Gi", "pods": str(pods)}
    if gpus:
        capacity[GPU] = str(gpus)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "type": "kwok",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/role": "agent",
                "node-role.kubernetes.io/agent": "",
                GPU_PRESENT_LABEL: "true" if gpus else "false",
                NODE_LABEL: "true",
            },
        },
        "spec": {
            "taints": [{"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}]
        },
        "status": _status(capacity),
    }


def _status(capacity: dict[str, str]) -> dict[str, Any]:
    return {
        "allocatable": dict(capacity),
        "capacity": dict(capacity),
        "nodeInfo": {
            "architecture": "amd64",
            "operatingSystem": "linux",
            "kubeletVersion": "fake",
            "kubeProxyVersion": "fake",
        },
        "phase": "Running",
    }


def create_nodes(
    kube: Kube,
    count: int,
    gpus: int,
    *,
    prefix: str = "kwok-gpu",
    cpu: int = 64,
    memory_gi: int = 512,
    pods: int = 110,
    progress: Callable[[str], None] = lambda _m: None,
) -> tuple[int, int]:
    """Create ``count`` nodes (existing ones are left as they are); (created, existed)."""

    def one(index: int) -> bool:
        body = node(f"{prefix}-{index:04d}", gpus, cpu, memory_gi, pods)
        try:
            kube.create(body)
        except ClusterConflict:
            return False
        path = f"/api/v1/nodes/{body['metadata']['name']}/status"
        kube.call(
            "PATCH",
            path,
            "set node status",
            body={"status": body["status"]},
            content_type="application/merge-patch+json",
        )
        return True

    with ThreadPoolExecutor(8, thread_name_prefix="nodes") as pool:
        made = list(pool.map(one, range(count)))
    created = sum(made)
    progress(f"{created} node(s) created, {count - created} existed")
    return created, count - created


def delete_nodes(kube: Kube) -> int:
    """Delete every node this command made (by its label); how many."""
    items, _ = kube.list_objects("Node", None, f"{NODE_LABEL}=true")
    gone = 0
    for item in items:
        try:
            gone += kube.delete("Node", item["metadata"]["name"])
        except TestbedError:
            continue
    return gone
