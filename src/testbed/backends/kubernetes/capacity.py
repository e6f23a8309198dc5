"""Capacity from the cluster's nodes: can any node ever hold a worker's pod?

The plan's capacity check (``plan.capacity``) trusts the resources a campaign declares; on a
cluster the nodes say what exists. A worker fits when one schedulable node's *allocatable*
CPU, memory, ``nvidia.com/gpu`` and MIG slices (``nvidia.com/mig-1g.10gb`` …) cover its
requests, and — where the node publishes its GPU memory (the ``nvidia.com/gpu.memory``
label of NVIDIA's feature discovery, MiB) — the model's estimated memory fits in the GPUs
it asks for. Treatments of a worker that fits nowhere are skipped with these numbers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from testbed.backends.kubernetes.manifests import resources
from testbed.plan.capacity import estimate

_SUFFIX: dict[str, Decimal | int] = {
    "": 1,
    "m": Decimal("0.001"),
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}
_QUANTITY = re.compile(r"^([0-9.]+)([a-zA-Z]*)$")
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"


def parse_quantity(text: Any) -> Decimal:
    """A Kubernetes quantity (``500m``, ``32Gi``, ``4``) as a number of base units."""
    match = _QUANTITY.match(str(text).strip())
    if not match or match.group(2) not in _SUFFIX:
        raise ValueError(f"not a Kubernetes quantity: {text!r}")
    return Decimal(match.group(1)) * Decimal(_SUFFIX[match.group(2)])


def schedulable(node: Mapping[str, Any]) -> bool:
    if node.get("spec", {}).get("unschedulable"):
        return False
    conditions = node.get("status", {}).get("conditions") or []
    ready = [c for c in conditions if c.get("type") == "Ready"]
    return not ready or ready[0].get("status") == "True"


def _shortfall(requests: Mapping[str, str], node: Mapping[str, Any]) -> list[str]:
    allocatable = node.get("status", {}).get("allocatable") or {}
    short = []
    for name, wanted in requests.items():
        has = parse_quantity(allocatable.get(name, "0"))
        if parse_quantity(wanted) > has:
            short.append(f"{name} {wanted} > {allocatable.get(name, '0')}")
    return short


def infeasible_reason(config: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]]) -> str:
    """Why no node can hold the worker ('' when one can)."""
    res = config.get("resources") or {}
    requests = resources(res)["requests"]
    usable = [n for n in nodes if schedulable(n)]
    if not usable:
        return "does not fit: the cluster has no schedulable node"
    closest: tuple[int, str, list[str]] | None = None
    for node in usable:
        short = _shortfall(requests, node)
        if not short:
            short = _gpu_memory_short(config, node)
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


def _gpu_memory_short(config: Mapping[str, Any], node: Mapping[str, Any]) -> list[str]:
    label = (node.get("metadata", {}).get("labels") or {}).get(GPU_MEMORY_LABEL)
    res = dict(config.get("resources") or {})
    if not label or not res.get("gpu") or isinstance(res.get("gpu"), Mapping):
        return []
    res["gpu_memory_gb"] = float(label) / 1024
    fit = estimate({**config, "resources": res})
    return [] if fit is None or fit.fits else [f"GPU memory: {fit.reason()}"]
