"""Capacity from the cluster's nodes: can any node ever hold a worker's pod?

The plan's model-fit check (``plan.model_fit``) trusts the resources a campaign declares; on a
cluster the nodes say what exists. A worker fits when one schedulable node's *allocatable*
CPU, memory, ``nvidia.com/gpu`` and MIG slices (``nvidia.com/mig-1g.10gb`` …) cover its pod's
requests — summed and compared as the scheduler does (``kubefacts.fit``) — and, where the
node publishes its GPU memory (the ``nvidia.com/gpu.memory`` label of NVIDIA's feature
discovery, MiB), the model's estimated memory fits in the GPUs it asks for. Treatments of a
worker that fits nowhere are skipped with these numbers.

Placement (node selector, affinity, taints) is deliberately not judged here: a node pool an
autoscaler adds may match it later, and when none does the scheduler's own message
("0/3 nodes are available: …") is the worker's error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubefacts.fit import NodeFacts, PodFacts, shortfall
from kubefacts.gpu import GPU_MEMORY_LABEL
from kubefacts.quantity import PODS, format_amount
from testbed.backends.kubernetes.launch import resources
from testbed.config.deployments import ServerDeployment
from testbed.plan.model_fit import model_fit


def schedulable(node: Mapping[str, Any]) -> bool:
    if node.get("spec", {}).get("unschedulable"):
        return False
    conditions = node.get("status", {}).get("conditions") or []
    ready = [c for c in conditions if c.get("type") == "Ready"]
    return not ready or ready[0].get("status") == "True"


def worker_requests(config: ServerDeployment) -> list[tuple[str, int]]:
    """What a worker's pod asks of a node, as the scheduler counts it (the pod slot left
    out: the question is "ever", not "now")."""
    pod = {"spec": {"containers": [{"resources": resources(config.resources)}]}}
    return [(name, value) for name, value in PodFacts.of(pod).requests if name != PODS]


def _short(requests: list[tuple[str, int]], node: Mapping[str, Any]) -> list[str]:
    allocatable = dict(NodeFacts.of(node).allocatable)
    return [
        f"{name} {format_amount(name, wanted)} > {format_amount(name, has)}"
        for name, wanted, has in shortfall(requests, allocatable)
    ]


def infeasible_reason(config: ServerDeployment, nodes: Sequence[Mapping[str, Any]]) -> str:
    """Why no node can hold the worker ('' when one can)."""
    requests = resources(config.resources)["requests"]
    usable = [n for n in nodes if schedulable(n)]
    if not usable:
        return "does not fit: the cluster has no schedulable node"
    asked = worker_requests(config)
    closest: tuple[int, str, list[str]] | None = None
    for node in usable:
        short = _short(asked, node) or _gpu_memory_short(config, node)
        if not short:
            return ""
        name = str(node["metadata"]["name"])
        if closest is None or len(short) < closest[0]:
            closest = (len(short), name, short)
    assert closest is not None
    wanted = ", ".join(f"{k} {v}" for k, v in requests.items())
    return (
        f"does not fit any of {len(usable)} node(s): requests {wanted}; closest node"
        f" {closest[1]} lacks {'; '.join(closest[2])}"
    )


def _gpu_memory_short(config: ServerDeployment, node: Mapping[str, Any]) -> list[str]:
    label = (node.get("metadata", {}).get("labels") or {}).get(GPU_MEMORY_LABEL)
    gpu = config.resources.gpu
    if not label or not gpu or isinstance(gpu, dict):
        return []
    res = config.resources.model_copy(update={"gpu_memory_gb": float(label) / 1024})
    fit = model_fit(config.model_copy(update={"resources": res}))
    return [] if fit is None or fit.fits else [f"GPU memory: {fit.reason()}"]
