"""The emulated cluster's shape and the Node objects made from it.

Each node is Ready, with capacity and allocatable for cpu, memory, pods, ``nvidia.com/gpu``
and MIG slices (``nvidia.com/mig-1g.10gb`` …, the names NVIDIA's device plugin uses with
the mixed strategy) and the labels GPU feature discovery puts on real nodes.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from kubefacts.gpu import (
    GPU,
    GPU_COUNT_LABEL,
    GPU_PRESENT_LABEL,
    GPU_PRODUCT_LABEL,
    MIG_STRATEGY_LABEL,
    PLUGIN_MIG,
    mig_resource,
)
from kubemu.apiserver.discovery import KUBE_VERSION
from kubemu.storage import meta as _meta


class ClusterShape(BaseModel):
    """How many nodes the emulator creates and what each offers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    nodes: int = Field(default=1, ge=0, le=100_000, description="number of nodes")
    gpus_per_node: int = Field(default=8, ge=0, le=64, description="nvidia.com/gpu per node")
    mig: dict[str, int] = Field(
        default_factory=dict, description="MIG profile (e.g. 1g.10gb) → slices per node"
    )
    node_cpu: int = Field(default=32, ge=1, description="CPU cores per node")
    node_memory_gb: int = Field(default=256, ge=1, description="memory per node (GiB)")
    node_pods: int = Field(default=110, ge=1, description="pods per node")
    gpu_product: str = Field(
        default="NVIDIA-A100-SXM4-80GB", description="nvidia.com/gpu.product label"
    )
    node_prefix: str = Field(default="emu-node-", description="node names: prefix + index")

    @field_validator("mig")
    @classmethod
    def _profiles(cls, value: dict[str, int]) -> dict[str, int]:
        for profile, count in value.items():
            if not PLUGIN_MIG.match(profile):
                raise ValueError(
                    f"MIG profile {profile!r} is not like 1g.10gb (<slices>g.<memory>gb)"
                )
            if count < 0:
                raise ValueError(f"MIG profile {profile}: count {count} must be >= 0")
        return value


def node_manifest(shape: ClusterShape, index: int) -> dict[str, Any]:
    """Node ``index`` of ``shape``: Ready, with its capacity, labels and addresses."""
    name = f"{shape.node_prefix}{index}"
    capacity, labels = _capacity_and_labels(shape, name)
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"podCIDR": f"10.244.{index % 65536 // 256}.{index % 256}/32"},
        "status": _status(name, index, capacity),
    }


def node_lease(node: dict[str, Any]) -> dict[str, Any]:
    """The Lease a node's kubelet renews (``kubectl describe node`` shows it)."""
    meta = node["metadata"]
    owner = {"apiVersion": "v1", "kind": "Node", "name": meta["name"], "uid": meta["uid"]}
    return {
        "metadata": {"name": meta["name"], "ownerReferences": [owner]},
        "spec": {
            "holderIdentity": meta["name"],
            "leaseDurationSeconds": 40,
            "renewTime": _meta.now_micro(),
        },
    }


def _capacity_and_labels(shape: ClusterShape, name: str) -> tuple[dict[str, str], dict[str, str]]:
    capacity = {
        "cpu": str(shape.node_cpu),
        "memory": f"{shape.node_memory_gb}Gi",
        "pods": str(shape.node_pods),
        "ephemeral-storage": "500Gi",
    }
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": "testbed-emulated",
        "testbed.io/emulated": "true",
    }
    if shape.gpus_per_node:
        capacity[GPU] = str(shape.gpus_per_node)
        labels.update(
            {
                GPU_PRESENT_LABEL: "true",
                GPU_PRODUCT_LABEL: shape.gpu_product,
                GPU_COUNT_LABEL: str(shape.gpus_per_node),
            }
        )
    for profile, count in shape.mig.items():
        capacity[mig_resource(profile)] = str(count)
    if shape.mig:
        labels[MIG_STRATEGY_LABEL] = "mixed"
    return capacity, labels


def _status(name: str, index: int, capacity: dict[str, str]) -> dict[str, Any]:
    now = _meta.now()
    conditions = [
        {
            "type": t,
            "status": s,
            "reason": r,
            "message": m,
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
        for t, s, r, m in (
            (
                "MemoryPressure",
                "False",
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available",
            ),
            ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            (
                "PIDPressure",
                "False",
                "KubeletHasSufficientPID",
                "kubelet has sufficient PID available",
            ),
            ("Ready", "True", "KubeletReady", "kubelet is posting ready status (emulated)"),
        )
    ]
    major, minor, patch = KUBE_VERSION
    return {
        "capacity": capacity,
        "allocatable": dict(capacity),
        "conditions": conditions,
        "addresses": [
            {"type": "InternalIP", "address": f"10.0.{index // 250 % 250}.{index % 250 + 1}"},
            {"type": "Hostname", "address": name},
        ],
        "nodeInfo": {
            "kubeletVersion": f"v{major}.{minor}.{patch}",
            "kubeProxyVersion": f"v{major}.{minor}.{patch}",
            "containerRuntimeVersion": "testbed://emulated",
            "operatingSystem": "linux",
            "architecture": "amd64",
            "osImage": "testbed emulated node",
            "kernelVersion": "",
            "machineID": "",
            "systemUUID": "",
            "bootID": "",
        },
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
    }
