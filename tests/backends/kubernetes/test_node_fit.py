"""Capacity from nodes: a worker fits when one schedulable node's allocatable resources cover
its requests (CPU, memory, GPUs, MIG slices) and, where published, its GPUs' memory."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from kubefacts.quantity import parse as parse_quantity
from testbed.backends.kubernetes.node_fit import infeasible_reason
from testbed.config.deployments import ServerDeployment, deployment_model, gpu_count


def node(name: str, labels: dict[str, str] | None = None, **allocatable: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {},
        "status": {
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def worker(params: dict[str, Any] | None = None, **resources: Any) -> ServerDeployment:
    """A vLLM worker as the planner resolves it (one shard per GPU, as validation wants)."""
    shards = gpu_count(resources.get("gpu")) or 1
    deployment = deployment_model(
        {
            "name": "w",
            "server": "vllm",
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "resources": resources,
            "params": {"tensor_parallel": shards, **(params or {})},
        }
    )
    assert isinstance(deployment, ServerDeployment)
    return deployment


def test_quantities() -> None:
    assert parse_quantity("500m") == Decimal("0.5")
    assert parse_quantity("32Gi") == 32 * 2**30
    assert parse_quantity("128G") == 128 * 10**9
    assert parse_quantity("4") == 4


def test_fits_on_one_node_not_on_the_sum_of_nodes() -> None:
    nodes = [
        node("a", cpu="8", memory="64Gi", **{"nvidia.com/gpu": "1"}),
        node("b", cpu="8", memory="64Gi", **{"nvidia.com/gpu": "1"}),
    ]
    assert infeasible_reason(worker(cpu=4, memory_gb=32, gpu=1), nodes) == ""
    reason = infeasible_reason(worker(cpu=4, memory_gb=32, gpu=2), nodes)
    assert "does not fit any of 2 node(s)" in reason
    assert "nvidia.com/gpu 2 > 1" in reason


def test_mig_slices_and_gpu_memory_label() -> None:
    mig = node("m", cpu="16", memory="128Gi", **{"nvidia.com/mig-1g.10gb": "7"})
    assert infeasible_reason(worker(cpu=1, memory_gb=8, gpu={"mig_1g_10gb": 2}), [mig]) == ""
    assert "mig-2g.20gb" in infeasible_reason(
        worker(cpu=1, memory_gb=8, gpu={"mig_2g_20gb": 1}), [mig]
    )
    # 8B in float32 (~33 GiB of weights) does not fit one 16 GiB GPU, whatever was declared.
    small = node(
        "s", {"nvidia.com/gpu.memory": "16384"}, cpu="16", memory="128Gi", **{"nvidia.com/gpu": "1"}
    )
    params = {"dtype": "float32", "kv_cache_gb": 1}
    deployment = worker(params, cpu=1, memory_gb=8, gpu=1, gpu_memory_gb=80)
    assert "GPU memory: does not fit" in infeasible_reason(deployment, [small])


def test_cordoned_or_unready_nodes_do_not_count() -> None:
    cordoned = node("c", cpu="64", memory="512Gi")
    cordoned["spec"]["unschedulable"] = True
    assert "no schedulable node" in infeasible_reason(worker(cpu=1, memory_gb=1, gpu=0), [cordoned])
