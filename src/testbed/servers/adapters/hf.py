"""``server: hf`` — testbed's transformers reference server (``testbed serve hf``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import ClassVar

from testbed import __version__
from testbed.core.errors import InputError
from testbed.servers.adapters.base import Params, ServerAdapter, ServerProtocol, extra, flag


class HfAdapter(ServerAdapter):
    kind = "hf"
    protocols: ClassVar[tuple[ServerProtocol, ...]] = ("openai", "tgi")

    def served_protocols(self, params: Params) -> tuple[ServerProtocol, ...]:
        return tuple(params.get("protocols") or self.protocols)

    def grpc_args(self, grpc_port: int) -> list[str]:
        return ["--grpc-port", str(grpc_port)]

    default_image = f"testbed:{__version__}"

    def args(self, params: Params, model: str, port: int, served_name: str) -> list[str]:
        settings = {
            "max_batch_size": params.get("max_batch_size"),
            "max_model_len": params.get("max_model_len"),
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
            *flag("--threads", params.get("threads", 1)),
            *flag("--dtype", params.get("dtype")),
            *flag("--protocols", ",".join(params.get("protocols") or []) or None),
            *[arg for item in sets for arg in ("--set", item)],
            *extra(params),
        ]

    def command(self, params: Params, model_path: Path | None, host: str, port: int) -> list[str]:
        if model_path is None:
            raise InputError(
                "the hf server needs a local model (bundled:NAME, a folder or s3://…),"
                " not a hub id: testbed runs offline"
            )
        args = self.args(params, str(model_path), port, model_path.name)
        return [sys.executable, "-m", "testbed", *args, "--host", host]

    def container_command(self) -> list[str]:
        return ["testbed"]

    def container_args(self, params: Params, model: str, served_name: str) -> list[str]:
        return [*self.args(params, model, self.container_port, served_name), "--host", "0.0.0.0"]
