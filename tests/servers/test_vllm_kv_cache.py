"""vLLM-CPU's KV cache sized to what is free: read like vLLM reads a NUMA node (from a fake
/sys), half of what is left beyond the headroom, capped, never below 1 GiB, and never over a
size the deployment chose itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.config.deployments import VllmParams
from testbed.core.errors import ServerStartError
from testbed.servers.adapters import kv_cache
from testbed.servers.adapters.kv_cache import GIB, NodeMemory, auto_kv_cache_gib, node_memory
from testbed.servers.adapters.vllm import VllmAdapter


def fake_sys(root: Path, free_kb: int, total_kb: int = 16 * 2**20) -> Path:
    node = root / "devices" / "system" / "node" / "node0"
    node.mkdir(parents=True)
    (node / "meminfo").write_text(
        f"Node 0 MemTotal:       {total_kb} kB\nNode 0 MemFree:        {free_kb} kB\n"
        "Node 0 Active(file):     1048576 kB\nNode 0 Inactive(file):   524288 kB\n"
        "Node 0 SReclaimable:     524288 kB\n"
    )
    return root


def test_node_memory_is_read_as_vllm_reads_it(tmp_path: Path) -> None:
    memory = node_memory(root=fake_sys(tmp_path, free_kb=6 * 2**20))
    assert memory.total == 16 * GIB
    assert memory.available == 8 * GIB  # MemFree + Active(file) + Inactive(file) + SReclaimable
    cgroup = tmp_path / "fs" / "cgroup"
    cgroup.mkdir(parents=True)
    (cgroup / "memory.max").write_text(str(6 * GIB))
    (cgroup / "memory.current").write_text(str(3 * GIB))
    limited = node_memory(root=tmp_path)
    assert (limited.total, limited.available) == (6 * GIB, 3 * GIB)


@pytest.mark.parametrize(
    ("available_gib", "size"), [(13.5, 4), (8.0, 3), (4.2, 1), (40.0, kv_cache.CAP_GIB)]
)
def test_the_size_is_half_of_what_is_left_capped(available_gib: float, size: int) -> None:
    memory = NodeMemory(int(16 * GIB), int(available_gib * GIB), "test")
    assert auto_kv_cache_gib(memory) == size


def test_too_little_memory_is_refused_with_the_numbers() -> None:
    with pytest.raises(ServerStartError, match=r"only 3\.00 of 16\.00 GiB are available"):
        auto_kv_cache_gib(NodeMemory(16 * GIB, 3 * GIB, "test"))


def test_the_adapter_sizes_only_what_the_deployment_left_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(kv_cache.VARIABLE, raising=False)
    monkeypatch.setattr(kv_cache, "node_memory", lambda: NodeMemory(16 * GIB, 10 * GIB, "t"))
    adapter = VllmAdapter()
    unset = VllmParams()
    assert adapter.env(unset)[kv_cache.VARIABLE] == "4"
    assert adapter.env(VllmParams(kv_cache_gb=1.5))[kv_cache.VARIABLE] == "2"  # rounded up
    assert kv_cache.VARIABLE not in adapter.env(VllmParams(gpu_memory_utilization=0.5))
    sized = VllmParams(extra_args=["--kv-cache-memory-bytes", "1"])
    assert kv_cache.VARIABLE not in adapter.env(sized)
    assert kv_cache.VARIABLE not in adapter.container_env(unset)  # a pod's memory is its own
    assert kv_cache.VARIABLE not in adapter.env(unset, gpus=1)  # its cache is on the GPU
    monkeypatch.setenv(kv_cache.VARIABLE, "3")
    assert kv_cache.VARIABLE not in adapter.env(unset)  # this environment's value passes through


@pytest.mark.parametrize(
    "extra",
    [
        ["--device-memory-utilization", "0.5"],  # vLLM's alias
        ["--gpu_memory_utilization=0.5"],  # underscores are dashes to vLLM
        ["--kv_cache_memory_bytes=2G"],
    ],
)
def test_extra_args_that_size_the_memory_are_read_as_vllm_reads_them(
    monkeypatch: pytest.MonkeyPatch, extra: list[str]
) -> None:
    monkeypatch.delenv(kv_cache.VARIABLE, raising=False)
    monkeypatch.setattr(kv_cache, "node_memory", lambda: NodeMemory(16 * GIB, 10 * GIB, "t"))
    assert kv_cache.VARIABLE not in VllmAdapter().env(VllmParams(extra_args=extra))
    # a flag whose name merely contains another's is not it
    other = VllmParams(extra_args=["--gpu-memory-utilization-report", "x"])
    assert kv_cache.VARIABLE in VllmAdapter().env(other)
