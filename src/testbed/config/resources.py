"""What a worker may use and where it may run: CPU, memory, GPUs or MIG slices (requests and
limits on Kubernetes), and the node selector, tolerations and accounts of its pod.

The local backend budgets its cores from these numbers, the model-fit check sizes weights
and KV cache against the GPU memory, and the Kubernetes backend writes them into the pod.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, ConfigDict, Field, field_validator

from kubefacts.gpu import CAMPAIGN_MIG, mig_memory_gb
from testbed.config.strict import Strict


class Resources(Strict):
    """What a worker may use: the local backend's CPU budget and the model-fit check's
    numbers, and on Kubernetes the pod's requests and limits (tgis-tester's names
    ``request_cpu``/``request_memory_gb`` are accepted for ``cpu``/``memory_gb``)."""

    cpu: float = Field(
        1.0,
        gt=0,
        validation_alias=AliasChoices("cpu", "request_cpu"),
        description="CPU cores requested (alias request_cpu)",
    )
    memory_gb: float = Field(
        8.0,
        gt=0,
        validation_alias=AliasChoices("memory_gb", "request_memory_gb"),
        description="host memory requested, GiB (alias request_memory_gb)",
    )
    limit_cpu: float | None = Field(
        None, gt=0, description="Kubernetes CPU limit, cores (default 2 × cpu: tgis-tester's 4/8)"
    )
    limit_memory_gb: float | None = Field(
        None, gt=0, description="Kubernetes memory limit, GiB (default 4 × memory_gb: 32/128)"
    )
    gpu: int | dict[str, int] | None = Field(
        0,
        description="GPUs: N → nvidia.com/gpu; 0 or null → none (CUDA_VISIBLE_DEVICES=-1);"
        " MIG slices as {mig_1g_10gb: 1} → nvidia.com/mig-1g.10gb",
    )
    gpu_memory_gb: float = Field(80.0, gt=0, description="memory of one GPU, GiB")

    model_config = ConfigDict(
        extra="forbid", validate_default=True, populate_by_name=True, allow_inf_nan=False
    )

    @field_validator("gpu")
    @classmethod
    def _gpu(cls, value: int | dict[str, int] | None) -> int | dict[str, int] | None:
        if isinstance(value, int) and value < 0:
            raise ValueError(f"gpu is {value}; give a count ≥ 0, null for none, or MIG slices")
        if isinstance(value, dict):
            for name, count in value.items():
                if not CAMPAIGN_MIG.match(name):
                    raise ValueError(
                        f"gpu.{name} is not a MIG profile; write e.g. gpu: {{mig_1g_10gb: 1}}"
                    )
                if count < 1:
                    raise ValueError(f"gpu.{name} is {count}; a MIG slice count is ≥ 1")
        return value

    @property
    def gpu_count(self) -> int:
        """Devices the worker gets: whole GPUs, or MIG slices."""
        return gpu_count(self.gpu)


def gpu_count(gpu: Any) -> int:
    """Devices of a ``resources.gpu`` value (an int, None, or MIG slices by profile)."""
    if isinstance(gpu, dict):
        return sum(int(n) for n in gpu.values())
    return int(gpu or 0)


def gpu_memory_total(resources: Resources) -> float:
    """GiB of GPU memory a worker gets (MIG: each slice's own size, from its profile name)."""
    gpu = resources.gpu
    if isinstance(gpu, dict):
        return sum(mig_memory_gb(name) * count for name, count in gpu.items())
    return (gpu or 0) * resources.gpu_memory_gb


class TgisResources(Resources):
    """tgis-tester's worker defaults: requests 4 CPU / 32 GiB, limits 8 / 128, one GPU."""

    cpu: float = Field(
        4.0, gt=0, validation_alias=AliasChoices("cpu", "request_cpu"), description="cores"
    )
    memory_gb: float = Field(
        32.0,
        gt=0,
        validation_alias=AliasChoices("memory_gb", "request_memory_gb"),
        description="GiB",
    )
    gpu: int | dict[str, int] | None = Field(1, description="see Resources.gpu")


class Toleration(Strict):
    """A pod toleration (Kubernetes field names in snake_case)."""

    key: str | None = None
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = Field(None, ge=0)


class Placement(Strict):
    """Where and as whom a worker's pod runs (Kubernetes backend only)."""

    node_selector: dict[str, str] = Field(default_factory=dict, description="node labels")
    tolerations: list[Toleration] = Field(default_factory=list)
    priority_class: str | None = Field(None, description="priorityClassName")
    service_account: str | None = Field(None, description="serviceAccountName")
    image_pull_secrets: list[str] = Field(default_factory=list, description="Secret names")
    pod_annotations: dict[str, str] = Field(
        default_factory=dict, description="annotations of the worker's pod"
    )
