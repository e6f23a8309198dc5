"""Each server kind's ``params:``: what a real server's parameters are, in testbed's names.

:class:`ServerParams` holds what every real server understands (dtype, context length,
batch size, shards, extra arguments, environment); each kind's class adds its own (the hf
reference server's threads and protocols, vLLM's memory and LoRA settings read with vLLM's
own argv rules, TGI's flash attention, TGIS's engine and tgis-tester's names). The
deployment kinds that hold them, and the rules across a deployment's fields (shards against
GPUs, dtype against the CPU), are :mod:`testbed.config.deployments`'.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Literal, get_args

from pydantic import AliasChoices, Field, model_validator

from kubefacts import vllm_argv
from testbed.config.diagnostics import located
from testbed.config.strict import Strict

__all__ = [
    "TGIS_FRAMEWORKS",
    "TGIS_SHARDING",
    "Dtype",
    "HfParams",
    "ServerParams",
    "TgiParams",
    "TgisFramework",
    "TgisParams",
    "VllmParams",
]

Dtype = Literal["float32", "float16", "bfloat16", "auto"]


class ServerParams(Strict):
    """Parameters every real server understands; each adapter maps them to its own flags."""

    dtype: Dtype = Field("float32", description="weights and activations type")
    max_model_len: int | None = Field(None, gt=0, description="context length, tokens")
    max_batch_size: int | None = Field(None, gt=0, description="requests decoded together")
    tensor_parallel: int = Field(1, gt=0, description="shards (one per GPU)")
    extra_args: list[str] = Field(default_factory=list, description="appended verbatim")
    env: dict[str, str] = Field(default_factory=dict, description="server environment")


class HfParams(ServerParams):
    """testbed's transformers reference server."""

    threads: int = Field(1, gt=0, description="torch threads (1 beat 2 on a 2-core machine)")
    max_batch_size: int | None = Field(8, gt=0, description="requests decoded together")
    protocols: tuple[Literal["openai", "tgi", "tgis"], ...] = Field(
        ("openai", "tgi"),
        min_length=1,
        description="protocols served: openai and tgi over HTTP, tgis (fmaas.GenerationService)"
        " over gRPC on its own port (needs the tgis extra)",
    )


class VllmParams(ServerParams):
    """vLLM's OpenAI-compatible server."""

    enforce_eager: bool = Field(True, description="skip graph capture/compile (faster start)")
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1, description="fraction")
    kv_cache_gb: float | None = Field(None, gt=0, description="CPU KV cache, GiB")
    python: str | None = Field(None, description="interpreter with vLLM (default .venv-vllm)")
    lora_modules: dict[str, str] | None = Field(
        None,
        description="LoRA adapters served beside the model, name → path (a folder the server"
        " can read, or a hub id): --enable-lora --lora-modules name=path …; a load's"
        " `models` mix names them",
    )
    max_loras: int | None = Field(
        None, gt=0, description="adapters in one batch (vLLM's --max-loras; its default 1)"
    )
    max_lora_rank: int | None = Field(
        None, gt=0, description="the largest adapter rank (vLLM's --max-lora-rank; its default 16)"
    )

    #: vLLM's flags (vllm_argv dest) testbed writes itself, and the parameter each comes from.
    WRITTEN: ClassVar[Mapping[str, str]] = {
        "model": "model",
        "served_model_name": "the deployment's served name",
        "port": "the backend's port",
        "host": "the backend's address",
        "dtype": "params.dtype",
        "max_model_len": "params.max_model_len",
        "max_num_seqs": "params.max_batch_size",
        "tensor_parallel_size": "params.tensor_parallel",
        "gpu_memory_utilization": "params.gpu_memory_utilization",
        "enable_lora": "params.lora_modules",
        "lora_modules": "params.lora_modules",
        "max_loras": "params.max_loras",
        "max_lora_rank": "params.max_lora_rank",
    }

    @model_validator(mode="after")
    def _extra_args_as_vllm_reads_them(self) -> VllmParams:
        """extra_args are read as vLLM reads them: a line vLLM refuses is refused here, and a
        flag testbed writes itself may not come again (vLLM keeps the last value, so the
        endpoint testbed waits for, or the treatment's label, would silently be another)."""
        try:
            line = vllm_argv.read(self.extra_args)
        except vllm_argv.VllmArgvError as exc:
            raise located(f"vLLM would refuse this: {exc}", "extra_args") from None
        loras = self.max_loras is not None or self.max_lora_rank is not None
        if loras and not self.lora_modules:
            raise located("max_loras and max_lora_rank need lora_modules", "lora_modules")
        for dest, source in self.WRITTEN.items():
            if dest in line.given and (source[:7] != "params." or self._set(source[7:])):
                flag = "--" + dest.replace("_", "-")
                raise located(
                    f"{flag} is in extra_args, but testbed already passes it (from {source});"
                    f" set it there instead of in extra_args",
                    "extra_args",
                )
        return self

    def _set(self, name: str) -> bool:
        """Whether parameter ``name`` writes its flag (a value of None writes nothing)."""
        return getattr(self, name) is not None


class TgiParams(ServerParams):
    """Hugging Face text-generation-inference."""

    flash_attention: bool = Field(False, description="needs a GPU")
    max_input_length: int | None = Field(None, gt=0, description="tokens")


#: TGIS's inference engines (``DEPLOYMENT_FRAMEWORK``, its launcher's
#: ``--deployment-framework``: a module of text_generation_server.inference_engine).
TgisFramework = Literal[
    "hf_transformers",
    "hf_accelerate",
    "hf_custom_tp",
    "hf_optimum_ort",
    "hf_optimum_bt",
    "tgis_native",
]
TGIS_FRAMEWORKS: tuple[str, ...] = get_args(TgisFramework)
#: Engines that shard a model over GPUs (tensor parallel): tgis_native, TGIS's documented
#: one, and hf_custom_tp, its older name for the same.
TGIS_SHARDING = ("tgis_native", "hf_custom_tp")


class TgisParams(TgiParams):
    """IBM's TGIS fork (tgis-tester's subject). tgis-tester's names are accepted as written:
    ``dtype_str`` for ``dtype``, ``num_shard`` for ``tensor_parallel``."""

    dtype: Dtype = Field(
        "float32",
        validation_alias=AliasChoices("dtype", "dtype_str"),
        description="weights and activations type (alias dtype_str)",
    )
    tensor_parallel: int = Field(
        1,
        gt=0,
        validation_alias=AliasChoices("tensor_parallel", "num_shard"),
        description="shards, one per GPU (alias num_shard; TGIS's NUM_GPUS)",
    )

    deployment_framework: TgisFramework = Field(
        description="TGIS's engine, passed through as --deployment-framework; required, as"
        " tgis-tester requires it (no default)"
    )
    pt2_compile: bool = False
