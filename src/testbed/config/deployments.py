"""Deployments: a server kind, a model source, server parameters and resources.

What a worker may use and where it may run (:mod:`.resources`), each server kind's
``params:`` (:mod:`.server_params`) and the base of every campaign model (:mod:`.strict`)
have their own modules; this one is the section's public face (``__all__``) and
re-exports them.

One class per server kind, chosen by the ``server`` discriminator. The cross-field rules of
each kind live in its own class (tgis-tester's lessons: shards must equal the GPU count,
CPU-only wants float32, flash attention needs a GPU); every rule says what to change.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    Field,
    TypeAdapter,
    model_validator,
)

from testbed.config.resources import (
    Placement,
    Resources,
    TgisResources,
    Toleration,
    gpu_count,
    gpu_memory_total,
)
from testbed.config.server_kinds import KINDS
from testbed.config.server_params import (
    TGIS_FRAMEWORKS,
    TGIS_SHARDING,
    Dtype,
    HfParams,
    ServerParams,
    TgiParams,
    TgisFramework,
    TgisParams,
    VllmParams,
)
from testbed.config.sim import SimParams
from testbed.config.stacks import StackDeployment
from testbed.config.strict import Strict
from testbed.core.urls import url_problem

__all__ = [
    "SERVER_KINDS",
    "TGIS_FRAMEWORKS",
    "TGIS_SHARDING",
    "AnyDeployment",
    "Deployment",
    "Dtype",
    "ExternalDeployment",
    "HfDeployment",
    "HfParams",
    "Placement",
    "RealServer",
    "Resources",
    "ServerDeployment",
    "ServerParams",
    "SimDeployment",
    "Strict",
    "TgiDeployment",
    "TgiParams",
    "TgisDeployment",
    "TgisFramework",
    "TgisParams",
    "TgisResources",
    "Tls",
    "Toleration",
    "VllmDeployment",
    "VllmParams",
    "deployment_model",
    "gpu_count",
    "gpu_memory_total",
    "worker_gpus",
]


class _Deployment(Strict):
    """Fields shared by every deployment kind."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", description="unique name")
    extends: str | None = Field(None, description="another deployment this one starts from")
    model: str = Field(
        "", description="bundled:NAME, a local folder, s3://bucket/prefix, or a hub id"
    )
    image: str | None = Field(None, description="container image (Kubernetes backend)")
    resources: Resources = Field(default_factory=Resources)
    placement: Placement = Field(
        default_factory=Placement, description="node selector, tolerations … (Kubernetes)"
    )
    startup_timeout_s: float = Field(300.0, gt=0, description="seconds to become ready")
    s3_endpoint_url: str | None = Field(None, description="for MinIO-compatible stores")

    def problems(self) -> list[str]:
        """Cross-field rules of this kind; each entry says what to change."""
        return []

    @model_validator(mode="after")
    def _rules(self) -> _Deployment:
        found = self.problems()
        if found:
            raise ValueError("; ".join(found))
        return self


class RealServer(_Deployment):
    """A server that loads a model: the rules shared by hf, vllm, tgi and tgis."""

    params: ServerParams
    #: How this kind refuses float16 on a CPU-only worker, in its own words (None: it does not).
    _cpu_float16: ClassVar[str | None] = None

    def problems(self) -> list[str]:
        found = []
        gpu, shards = self.resources.gpu_count, self.params.tensor_parallel
        if gpu and shards != gpu:
            found.append(
                f"tensor_parallel is {shards} but resources.gpu is {gpu}: shards must equal the"
                f" GPU count — set params.tensor_parallel: {gpu} or resources.gpu: {shards}"
            )
        if not gpu and shards > 1:
            found.append(
                f"tensor_parallel {shards} needs GPUs — set resources.gpu: {shards}"
                " or params.tensor_parallel: 1"
            )
        if not self.model:
            found.append("model is empty — set model: bundled:smollm2-135m, a folder or s3://…")
        if self._cpu_float16 and not gpu and self.params.dtype == "float16":
            found.append(self._cpu_float16)
        return found


class SimDeployment(_Deployment):
    """The built-in simulator: a fast stand-in with a known latency model."""

    server: Literal["sim"]
    model: str = "sim-model"
    params: SimParams = Field(default_factory=SimParams)


class HfDeployment(RealServer):
    server: Literal["hf"]
    params: HfParams = Field(default_factory=HfParams)
    _cpu_float16 = "float16 is not supported on CPU — set params.dtype: float32"


class VllmDeployment(RealServer):
    server: Literal["vllm"]
    params: VllmParams = Field(default_factory=VllmParams)
    _cpu_float16 = "vLLM on CPU has no float16 — set params.dtype: float32 or bfloat16"


class TgiDeployment(RealServer):
    server: Literal["tgi"]
    params: TgiParams = Field(default_factory=TgiParams)

    def problems(self) -> list[str]:
        found = super().problems()
        if self.params.flash_attention and not self.resources.gpu:
            found.append(
                "flash_attention needs a GPU — set resources.gpu: 1 or params.flash_attention:"
                " false"
            )
        return found


class TgisDeployment(TgiDeployment):
    """TGIS, with its documented rules: ``deployment_framework`` has no default (tgis-tester
    requires it); sharding (``tensor_parallel`` > 1, ``NUM_GPUS``) needs a tensor-parallel
    engine, tgis_native (TGIS's README: "Running sharded models") or hf_custom_tp;
    hf_accelerate spreads ONE process over the worker's GPUs (accelerate's device map), so
    it takes several GPUs with ``tensor_parallel: 1``; flash attention runs in tgis_native
    or hf_custom_tp only (TGIS would switch any other engine to hf_custom_tp)."""

    server: Literal["tgis"]  # type: ignore[assignment]
    params: TgisParams
    resources: TgisResources = Field(default_factory=TgisResources)

    @model_validator(mode="before")
    @classmethod
    def _framework_given(cls, data: Any) -> Any:
        if isinstance(data, dict):
            params = data.get("params")
            if not isinstance(params, dict) or "deployment_framework" not in params:
                raise ValueError(
                    "params.deployment_framework is required for tgis (it has no default, as"
                    f" in tgis-tester) — set one of {', '.join(TGIS_FRAMEWORKS)}"
                )
        return data

    def problems(self) -> list[str]:
        p = self.params
        accelerate = p.deployment_framework == "hf_accelerate"
        # hf_accelerate: one process over several GPUs is not a shard-count mismatch
        found = [
            f for f in super().problems() if not (accelerate and f.startswith("tensor_parallel"))
        ]
        if not self.resources.gpu and p.dtype != "float32":
            found.append(f"CPU-only TGIS wants float32, not {p.dtype} — set params.dtype: float32")
        if p.tensor_parallel > 1 and p.deployment_framework not in TGIS_SHARDING:
            found.append(
                f"sharding (tensor_parallel {p.tensor_parallel}) needs a tensor-parallel engine,"
                f" and {p.deployment_framework} is not one"
                + (" (it spreads one process over the GPUs)" if accelerate else "")
                + " — set params.deployment_framework: tgis_native (or hf_custom_tp)"
                + (", or tensor_parallel: 1 with hf_accelerate" if accelerate else "")
            )
        if p.flash_attention and p.deployment_framework not in TGIS_SHARDING:
            found.append(
                f"flash_attention runs in tgis_native or hf_custom_tp, not"
                f" {p.deployment_framework} (TGIS would switch the engine) — set"
                " params.deployment_framework: tgis_native"
            )
        return found


class Tls(Strict):
    """How an ``https://`` server's certificate is checked."""

    verify: bool = Field(
        True, description="check the certificate (false: accept any, e.g. self-signed)"
    )
    ca_bundle: str | None = Field(
        None, description="PEM file of the CAs to trust, relative to the campaign file"
    )


class ExternalDeployment(_Deployment):
    """A server that already runs: nothing is provisioned."""

    server: Literal["external"]
    url: str = Field(pattern=r"^https?://", description="base URL, e.g. http://host:8000")
    protocol: Literal["openai", "tgi", "tgis"] = "openai"
    grpc: str | None = Field(
        None,
        pattern=r"^[^/\s]+:\d+$",
        description="host:port of the TGIS gRPC service (protocol: tgis); url stays the HTTP"
        " side (health, metrics)",
    )
    api_key: str | None = Field(None, description="use ${env:NAME}; never written anywhere")
    tokenizer: str | None = Field(None, description="local tokenizer folder for token counts")
    tls: Tls = Field(default_factory=Tls, description="certificate checks of an https:// url")
    params: dict[str, Any] = Field(default_factory=dict, description="labels only")

    def problems(self) -> list[str]:
        found = super().problems()
        problem = url_problem(self.url)
        if problem:
            found.append(f"url {self.url!r}: {problem} — give http://host:port")
        if self.protocol == "tgis" and self.grpc is None:
            found.append("protocol tgis speaks gRPC — add grpc: HOST:PORT (TGIS listens on 8033)")
        if self.tls != Tls() and not self.url.startswith("https://"):
            found.append(
                f"tls applies to https:// URLs, and url is {self.url} — use https:// or drop tls"
            )
        return found


#: A deployment served by one process or pod that testbed starts from a kind's adapter.
ServerDeployment = SimDeployment | HfDeployment | VllmDeployment | TgiDeployment | TgisDeployment
#: Any resolved deployment: what a plan's worker holds and the backends receive.
AnyDeployment = ServerDeployment | ExternalDeployment | StackDeployment
Deployment = Annotated[AnyDeployment, Field(discriminator="server")]


@functools.cache
def _deployments() -> TypeAdapter[AnyDeployment]:
    return TypeAdapter(Deployment)


def worker_gpus(deployment: AnyDeployment) -> int:
    """GPU devices a deployment's server takes (a stack's objects ask the cluster for theirs)."""
    return 0 if isinstance(deployment, StackDeployment) else deployment.resources.gpu_count


def deployment_model(raw: Mapping[str, Any]) -> AnyDeployment:
    """One deployment (a resolved mapping, as written or as ``plan.json`` holds it) validated
    into its kind's model; pydantic's ValidationError when it is not one."""
    return _deployments().validate_python(raw)


SERVER_KINDS = tuple(KINDS)
