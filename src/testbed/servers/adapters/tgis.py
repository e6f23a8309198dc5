"""``server: tgis`` — IBM's text-generation-inference fork (tgis-tester's subject; image only).

The launcher takes its settings as flags or the same-named environment variables; testbed
passes flags for what it maps (``--model-name``, ``--deployment-framework``,
``--dtype-str``, ``--max-batch-size``, ``--max-sequence-length``) and environment variables
for what only the Python shards read: ``NUM_GPUS`` (shards; must equal the GPU count),
``FLASH_ATTENTION``, ``PT2_COMPILE``, and ``CUDA_VISIBLE_DEVICES=-1`` for CPU-only pods, as
tgis-tester did. Inference is gRPC on port 8033 (``fmaas.GenerationService``); HTTP on
3000 serves only ``/health`` and ``/metrics``: ``protocols`` is ``tgis``, which testbed's
gRPC client (:mod:`testbed.clients.tgis`) speaks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from testbed.config.deployments import ServerDeployment, TgisParams
from testbed.servers.adapters.base import GRPC_PORT, ServerAdapter, extra, flag

TGIS_IMAGE = "quay.io/opendatahub/text-generation-inference"
TGIS_TAG = "stable"


def _bool(value: Any) -> str:
    return "true" if value else "false"


#: Generic parameter (or ``model``/``port``/``grpc_port``) → TGIS launcher flag: the one
#: statement of the launcher's flags, written by :meth:`TgisAdapter.args` and read backwards
#: by the emulator's TGIS stand-in (handed it by ``testbed cluster emulate``).
LAUNCHER_FLAGS: Mapping[str, str] = {
    "model": "--model-name",
    "port": "--port",
    "grpc_port": "--grpc-port",
    "deployment_framework": "--deployment-framework",
    "dtype": "--dtype-str",
    "max_batch_size": "--max-batch-size",
    "max_model_len": "--max-sequence-length",
}


class TgisAdapter(ServerAdapter[TgisParams]):
    kind = "tgis"
    container_port = 3000
    default_image = f"{TGIS_IMAGE}:{TGIS_TAG}"

    def args(self, params: TgisParams, model: str, port: int, served_name: str) -> list[str]:
        del served_name
        to = LAUNCHER_FLAGS
        return [
            to["model"],
            model,
            to["port"],
            str(port),
            to["grpc_port"],
            str(GRPC_PORT),
            to["deployment_framework"],
            params.deployment_framework,  # required by the config: no default
            *flag(to["dtype"], params.dtype),
            *flag(to["max_batch_size"], params.max_batch_size),
            *flag(to["max_model_len"], params.max_model_len),
            *extra(params),
        ]

    def container_env(self, params: TgisParams) -> dict[str, str]:
        return {
            "NUM_GPUS": str(params.tensor_parallel),
            "FLASH_ATTENTION": _bool(params.flash_attention),
            "PT2_COMPILE": _bool(params.pt2_compile),
        }

    def container_command(self) -> list[str]:
        return ["text-generation-launcher"]

    def container(self, deployment: ServerDeployment, model: str) -> dict[str, Any]:
        spec = super().container(deployment, model)
        if not deployment.resources.gpu:
            env = [e for e in spec["env"] if e["name"] not in ("CUDA_VISIBLE_DEVICES", "NUM_GPUS")]
            # CPU only: no CUDA device, and NUM_GPUS would contradict the missing GPUs.
            spec["env"] = sorted(
                [*env, {"name": "CUDA_VISIBLE_DEVICES", "value": "-1"}], key=lambda e: e["name"]
            )
        return spec

    def served_model_name(self, deployment: ServerDeployment) -> str:
        return deployment.model
