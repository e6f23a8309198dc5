"""The model-fit check (Tekton seed): does a deployment's model fit in its resources?

memory = weights + KV cache, where
  weights  = parameters × bytes per element of the dtype,
  KV cache = 2 (K and V) × layers × KV heads × head size × bytes × max_model_len × max batch
             (vLLM pages its KV cache: its configured kv_cache_gb, or at least one sequence
             of max_model_len, without which it refuses to start),
and 10 % more for activations and runtime buffers. A treatment that does not fit is skipped
with these numbers; it is never started. The numbers of each model come from
``config.catalogue``.
"""

from __future__ import annotations

from dataclasses import dataclass

from testbed.config.catalogue import model_shape
from testbed.config.deployments import AnyDeployment, RealServer, VllmParams, gpu_memory_total
from testbed.config.server_kinds import server_kind

GIB = 1024**3
_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "auto": 2}
_OVERHEAD = 1.10


@dataclass(frozen=True)
class ModelFit:
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


def model_fit(deployment: AnyDeployment) -> ModelFit | None:
    """The memory estimate of a resolved deployment, or None when it cannot be known."""
    kind = server_kind(deployment.server)
    shape = model_shape(deployment.model)
    if kind.default_batch is None or shape is None or not isinstance(deployment, RealServer):
        return None
    params, res = deployment.params, deployment.resources
    width = _BYTES.get(params.dtype, 4)
    weights = shape.weight_bytes(width)
    context = params.max_model_len or shape.context
    batch = params.max_batch_size or kind.default_batch
    kv_cache_gb = params.kv_cache_gb if isinstance(params, VllmParams) else None
    if kind.kv_pool and kv_cache_gb:
        kv = kv_cache_gb * GIB
        kv_text = f"KV cache {kv_cache_gb} GiB"
    elif kind.kv_pool:
        kv = shape.kv_bytes_per_token(width) * context
        kv_text = f"KV {kv / GIB:.2f} GiB for one {context}-token sequence"
    else:
        kv = shape.kv_bytes_per_token(width) * context * batch
        kv_text = f"KV {kv / GIB:.1f} GiB for {context} tokens × {batch} seqs"
    available = gpu_memory_total(res) if res.gpu_count else res.memory_gb
    detail = f"weights {weights / GIB:.2f} GiB {params.dtype} + {kv_text} + 10 %"
    return ModelFit((weights + kv) * _OVERHEAD / GIB, available, detail)
