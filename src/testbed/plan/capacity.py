"""Capacity planner (Tekton seed): does a deployment's model fit in its resources?

memory = weights + KV cache, where
  weights  = parameters × bytes per element of the dtype,
  KV cache = 2 (K and V) × layers × KV heads × head size × bytes × max_model_len × max batch
             (vLLM pages its KV cache: its configured kv_cache_gb, or at least one sequence
             of max_model_len, without which it refuses to start),
and 10 % more for activations and runtime buffers. A treatment that does not fit is skipped
with these numbers; it is never started.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from testbed.config.deployments import gpu_count, gpu_memory_total

GIB = 1024**3
_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "auto": 2}
_OVERHEAD = 1.10


@dataclass(frozen=True)
class ModelShape:
    """What the planner needs to know of a model's architecture."""

    params: float  # parameter count
    layers: int
    kv_heads: int
    head_dim: int
    context: int  # default max_model_len


#: Known models, by the name a deployment uses (a hub id or ``bundled:NAME``).
CATALOGUE: dict[str, ModelShape] = {
    "bundled:smollm2-135m": ModelShape(134.5e6, 30, 3, 64, 8192),
    "HuggingFaceTB/SmolLM2-135M-Instruct": ModelShape(134.5e6, 30, 3, 64, 8192),
    "google/flan-t5-small": ModelShape(77e6, 8, 6, 64, 512),
    "google/flan-t5-base": ModelShape(248e6, 12, 12, 64, 512),
    "meta-llama/Llama-3.1-8B-Instruct": ModelShape(8.03e9, 32, 8, 128, 131072),
    "meta-llama/Llama-3.1-70B-Instruct": ModelShape(70.6e9, 80, 8, 128, 131072),
    "mistralai/Mistral-7B-Instruct-v0.3": ModelShape(7.25e9, 32, 8, 128, 32768),
    "ibm-granite/granite-3.1-8b-instruct": ModelShape(8.17e9, 40, 8, 128, 131072),
    "Qwen/Qwen2.5-7B-Instruct": ModelShape(7.62e9, 28, 4, 128, 32768),
}

_DEFAULT_BATCH = {"hf": 8, "vllm": 256, "tgi": 32, "tgis": 32}


@dataclass(frozen=True)
class Estimate:
    needed_gib: float
    available_gib: float
    detail: str

    @property
    def fits(self) -> bool:
        return self.needed_gib <= self.available_gib

    def reason(self) -> str:
        return (
            f"does not fit: needs {self.needed_gib:.1f} GiB ({self.detail}),"
            f" has {self.available_gib:.1f} GiB"
        )


def estimate(deployment: dict[str, Any]) -> Estimate | None:
    """The memory estimate of a resolved deployment, or None when it cannot be known."""
    server = deployment.get("server")
    shape = CATALOGUE.get(str(deployment.get("model", "")))
    if server not in _DEFAULT_BATCH or shape is None:
        return None
    params = deployment.get("params") or {}
    res = deployment.get("resources") or {}
    width = _BYTES.get(str(params.get("dtype", "float32")), 4)
    weights = shape.params * width
    context = int(params.get("max_model_len") or shape.context)
    batch = int(params.get("max_batch_size") or _DEFAULT_BATCH[server])
    if server == "vllm" and params.get("kv_cache_gb"):
        kv = float(params["kv_cache_gb"]) * GIB
        kv_text = f"KV cache {params['kv_cache_gb']} GiB"
    elif server == "vllm":
        kv = 2 * shape.layers * shape.kv_heads * shape.head_dim * width * context
        kv_text = f"KV {kv / GIB:.2f} GiB for one {context}-token sequence"
    else:
        kv = 2 * shape.layers * shape.kv_heads * shape.head_dim * width * context * batch
        kv_text = f"KV {kv / GIB:.1f} GiB for {context} tokens × {batch} seqs"
    gpus = gpu_count(res.get("gpu"))
    available = gpu_memory_total(res) if gpus else float(res.get("memory_gb", 8))
    detail = f"weights {weights / GIB:.2f} GiB {params.get('dtype', 'float32')} + {kv_text} + 10 %"
    return Estimate((weights + kv) * _OVERHEAD / GIB, available, detail)
