"""``server: vllm`` — vLLM's OpenAI-compatible server, locally or as a container.

Generic parameters map to vLLM's flags: ``dtype`` → ``--dtype``, ``max_model_len`` →
``--max-model-len``, ``max_batch_size`` → ``--max-num-seqs``, ``tensor_parallel`` →
``--tensor-parallel-size``, ``enforce_eager`` → ``--enforce-eager``,
``gpu_memory_utilization`` → ``--gpu-memory-utilization``, ``lora_modules`` →
``--enable-lora --lora-modules name=path …`` (``max_loras``, ``max_lora_rank`` → their
flags; vLLM's LoRAParserAction reads ``name=path``), ``kv_cache_gb`` → the CPU
backend's ``VLLM_CPU_KVCACHE_SPACE`` (whole GiB), ``extra_args`` verbatim. A local server
whose deployment sets no memory size gets one that fits what is free (``kv_cache.py``):
vLLM-CPU's default reserves 92 % of the node and refuses to start beside other processes.

Locally vLLM runs from its own virtual environment (``make vllm`` builds ``.venv-vllm``
with the ``vllm-cpu`` package), so its pins never constrain testbed's. The interpreter is,
first found wins: the ``python`` parameter, ``$TESTBED_VLLM_PYTHON``, ``.venv-vllm`` of this
checkout, ``.venv-vllm`` of the current directory. It is started as
``python -m vllm.entrypoints.openai.api_server`` because the ``vllm`` console command fails
under the ``vllm-cpu`` distribution name.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

from testbed.config.deployments import VllmParams
from testbed.core.errors import InfrastructureError, InputError
from testbed.servers.adapters import kv_cache
from testbed.servers.adapters.base import ServerAdapter, extra, flag, switch

ENTRY = ["-m", "vllm.entrypoints.openai.api_server"]
VLLM_VERSION = "0.32.0"
PYTHON_ENV = "TESTBED_VLLM_PYTHON"
_REPO = Path(__file__).resolve().parents[4]  # src/testbed/servers/adapters/vllm.py


def vllm_python(
    python: str | None = None,
    environ: Mapping[str, str] | None = None,
    option: str = "params.python",
) -> Path:
    """The interpreter that has vLLM installed (see the module docstring for the order).

    ``python`` is the one the user chose with ``option``, named in the messages
    (``params.python``; the emulator is handed this lookup with ``--vllm-python``)."""
    env = os.environ if environ is None else environ
    explicit = python or env.get(PYTHON_ENV)
    if explicit:
        path = Path(explicit).expanduser()
        if not path.exists():
            source = option if python else PYTHON_ENV
            raise InputError(
                f"{source} is {path}, which does not exist; point it at the python of a"
                " virtual environment with vLLM installed"
            )
        return path
    candidates = [_REPO / ".venv-vllm" / "bin" / "python", Path.cwd() / ".venv-vllm/bin/python"]
    for candidate in candidates:
        if candidate.exists():
            return candidate
    raise InfrastructureError(
        f"vLLM is not installed: no {candidates[0]}; run `make vllm`, or set {option}"
        f" or {PYTHON_ENV} to the python of an environment with vLLM"
    )


def lora_args(params: VllmParams) -> list[str]:
    """``--enable-lora --lora-modules a=/p b=/q`` (one flag, the adapters after it, as vLLM's
    nargs='+' takes them) and the LoRA sizes; nothing without adapters."""
    if not params.lora_modules:
        return []
    modules = [f"{name}={path}" for name, path in params.lora_modules.items()]
    return [
        "--enable-lora",
        "--lora-modules",
        *modules,
        *flag("--max-loras", params.max_loras),
        *flag("--max-lora-rank", params.max_lora_rank),
    ]


class VllmAdapter(ServerAdapter[VllmParams]):
    kind = "vllm"
    default_image = f"vllm/vllm-openai:v{VLLM_VERSION}"

    def args(self, params: VllmParams, model: str, port: int, served_name: str) -> list[str]:
        return [
            "--model",
            model,
            "--served-model-name",
            served_name,
            "--port",
            str(port),
            *flag("--dtype", params.dtype),
            *flag("--max-model-len", params.max_model_len),
            *flag("--max-num-seqs", params.max_batch_size),
            *flag("--tensor-parallel-size", params.tensor_parallel),
            *switch("--enforce-eager", params.enforce_eager),
            *flag("--gpu-memory-utilization", params.gpu_memory_utilization),
            *lora_args(params),
            *extra(params),
        ]

    def command(
        self, params: VllmParams, model_path: Path | None, host: str, port: int
    ) -> list[str]:
        if model_path is None:
            raise InputError(
                "a local vLLM server gets its model as a folder (bundled:NAME, a path or"
                " s3://…); hub ids need network access this backend does not assume"
            )
        python = vllm_python(params.python)
        args = self.args(params, str(model_path), port, model_path.name)
        return [str(python), *ENTRY, *args, "--host", host]

    def env(self, params: VllmParams, gpus: int = 0) -> dict[str, str]:
        # A local server always gets a folder: nothing may try the hub.
        offline = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        env = {**offline, **self.container_env(params)}
        # On GPUs the KV cache lives in GPU memory (--gpu-memory-utilization's business)
        if not gpus and not kv_cache.explicit(params, os.environ):
            size = kv_cache.auto_kv_cache_gib(kv_cache.node_memory())
            env[kv_cache.VARIABLE] = str(size)
        return env

    def container_env(self, params: VllmParams) -> dict[str, str]:
        env = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
        kv = params.kv_cache_gb
        if kv is not None:  # whole GiB: vLLM parses the variable as an integer
            env["VLLM_CPU_KVCACHE_SPACE"] = str(max(1, math.ceil(kv)))
        return env

    def container_args(self, params: VllmParams, model: str, served_name: str) -> list[str]:
        # The image's entry point is the API server; it listens on 0.0.0.0 by default.
        return self.args(params, model, self.container_port, served_name)
