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

from testbed.config.deployments import ServerDeployment, TgiParams
from testbed.servers.adapters.base import ServerAdapter, extra, flag

TGI_IMAGE = "ghcr.io/huggingface/text-generation-inference"
TGI_TAG = "3.3.4"
_TGI_DTYPES = ("float16", "bfloat16")


#: Generic parameter (or ``model``/``port``) → ``text-generation-launcher`` flag: the one
#: statement of the launcher's flags, written by :meth:`TgiAdapter.args` and read backwards
#: by the emulator's TGI stand-in (handed it by ``testbed cluster emulate``).
LAUNCHER_FLAGS: Mapping[str, str] = {
    "model": "--model-id",
    "port": "--port",
    "tensor_parallel": "--num-shard",
    "dtype": "--dtype",
    "max_batch_size": "--max-batch-size",
    "max_input_length": "--max-input-tokens",
    "max_model_len": "--max-total-tokens",
}
#: Launcher flags that take no value.
LAUNCHER_SWITCHES = frozenset({"--trust-remote-code", "--disable-custom-kernels", "--json-output"})


class TgiAdapter(ServerAdapter[TgiParams]):
    kind = "tgi"
    container_port = 8080
    default_image = f"{TGI_IMAGE}:{TGI_TAG}"

    def args(self, params: TgiParams, model: str, port: int, served_name: str) -> list[str]:
        del served_name  # TGI serves one model and accepts any name ("tgi")
        dtype = params.dtype
        shards = params.tensor_parallel
        to = LAUNCHER_FLAGS
        return [
            to["model"],
            model,
            to["port"],
            str(port),
            *flag(to["tensor_parallel"], shards if shards > 1 else None),
            *flag(to["dtype"], dtype if dtype in _TGI_DTYPES else None),
            *flag(to["max_batch_size"], params.max_batch_size),
            *flag(to["max_input_length"], params.max_input_length),
            *flag(to["max_model_len"], params.max_model_len),
            *extra(params),
        ]

    def container_env(self, params: TgiParams) -> dict[str, str]:
        if params.flash_attention:
            return {}
        return {"USE_FLASH_ATTENTION": "false"}

    def served_model_name(self, deployment: ServerDeployment) -> str:
        return "tgi"  # what TGI's OpenAI routes report as the model
