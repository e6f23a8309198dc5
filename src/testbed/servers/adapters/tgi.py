"""``server: tgi`` — Hugging Face text-generation-inference (a cluster server: image only).

Generic parameters map to ``text-generation-launcher`` flags: ``tensor_parallel`` →
``--num-shard``, ``max_batch_size`` → ``--max-batch-size``, ``max_input_length`` →
``--max-input-tokens``, ``max_model_len`` → ``--max-total-tokens``, ``dtype`` → ``--dtype``
(TGI takes only float16 and bfloat16; float32 and auto leave the model's own dtype).
``flash_attention: false`` sets ``USE_FLASH_ATTENTION=false``. The container listens on
8080 rather than the image's default 80, so non-root pods (OpenShift) can bind it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from testbed.servers.adapters.base import Params, ServerAdapter, ServerProtocol, extra, flag

TGI_IMAGE = "ghcr.io/huggingface/text-generation-inference"
TGI_TAG = "3.3.4"
_TGI_DTYPES = ("float16", "bfloat16")


class TgiAdapter(ServerAdapter):
    kind = "tgi"
    protocols: ClassVar[tuple[ServerProtocol, ...]] = ("tgi", "openai")
    container_port = 8080
    default_image = f"{TGI_IMAGE}:{TGI_TAG}"

    def args(self, params: Params, model: str, port: int, served_name: str) -> list[str]:
        del served_name  # TGI serves one model and accepts any name ("tgi")
        dtype = params.get("dtype")
        shards = params.get("tensor_parallel")
        return [
            "--model-id",
            model,
            "--port",
            str(port),
            *flag("--num-shard", shards if shards and shards > 1 else None),
            *flag("--dtype", dtype if dtype in _TGI_DTYPES else None),
            *flag("--max-batch-size", params.get("max_batch_size")),
            *flag("--max-input-tokens", params.get("max_input_length")),
            *flag("--max-total-tokens", params.get("max_model_len")),
            *extra(params),
        ]

    def container_env(self, params: Params) -> dict[str, str]:
        if params.get("flash_attention", False):
            return {}
        return {"USE_FLASH_ATTENTION": "false"}

    def served_model_name(self, deployment: Mapping[str, Any]) -> str:
        return "tgi"  # what TGI's OpenAI routes report as the model
