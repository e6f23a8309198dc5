"""``server: hf`` — testbed's transformers reference server (``testbed serve hf``)."""

from __future__ import annotations

from pathlib import Path

from testbed.config.deployments import HfParams
from testbed.core.errors import InputError
from testbed.servers.adapters.base import extra, flag
from testbed.servers.adapters.own import OwnServerAdapter


class HfAdapter(OwnServerAdapter[HfParams]):
    kind = "hf"

    def args(self, params: HfParams, model: str, port: int, served_name: str) -> list[str]:
        settings = {
            "max_batch_size": params.max_batch_size,
            "max_model_len": params.max_model_len,
            "served_model_name": served_name,
        }
        sets = [f"{k}={v}" for k, v in settings.items() if v is not None]
        return [
            "serve",
            "hf",
            "--model",
            model,
            "--port",
            str(port),
            *flag("--threads", params.threads),
            *flag("--dtype", params.dtype),
            *flag("--protocols", ",".join(params.protocols) or None),
            *[arg for item in sets for arg in ("--set", item)],
            *extra(params),
        ]

    def command(self, params: HfParams, model_path: Path | None, host: str, port: int) -> list[str]:
        if model_path is None:
            raise InputError(
                "the hf server needs a local model (bundled:NAME, a folder or s3://…),"
                " not a hub id: testbed runs offline"
            )
        return self.local_command(self.args(params, str(model_path), port, model_path.name), host)
