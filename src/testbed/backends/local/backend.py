"""The local backend: each worker's server is a child process on 127.0.0.1 on a free port.

Readiness is awaited with the deployment's timeout; the server's output goes to
``server.log`` in the worker's directory; a server that exits at any moment resolves the
handle's ``died`` future with the tail of its log, which the pipeline reports as an
infrastructure ERROR. Leaving :meth:`provision` always stops the whole process group.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from testbed import __version__
from testbed.backends.base import Backend, Handle
from testbed.backends.local import process
from testbed.backends.local.ports import free_port
from testbed.backends.local.readiness import http_get, wait_ready
from testbed.clients.endpoint import Endpoint
from testbed.config.server_kinds import kind_of
from testbed.core.errors import ServerStartError
from testbed.servers.adapters import adapter_for
from testbed.servers.models import parse_source, resolve_model

HOST = "127.0.0.1"
PID_DIR = "pids"


class LocalBackend(Backend):
    """Servers as child processes of this machine."""

    name = "local"

    def __init__(self, run_dir: Path, base_dir: Path | None = None) -> None:
        self.run_dir = run_dir
        self.base_dir = base_dir or Path.cwd()  # relative paths of the campaign start here

    async def cleanup_leftovers(self, run_dir: Path) -> list[str]:
        ended = []
        for pid_file in sorted((run_dir / PID_DIR).glob("*.json")):
            message = process.kill_leftover(pid_file)
            if message:
                ended.append(message)
        return ended

    @classmethod
    def for_run(cls, run_dir: Path, config: Mapping[str, Any], base_dir: Path) -> LocalBackend:
        del config
        return cls(run_dir, base_dir)

    async def prepare(self, deployments: list[dict[str, Any]]) -> list[str]:
        done = []
        seen: set[str] = set()
        for deployment in deployments:
            model = str(deployment.get("model") or "")
            if not _reads_local_weights(deployment) or model in seen:
                continue
            seen.add(model)
            folder = await asyncio.to_thread(
                resolve_model, model, endpoint_url=deployment.get("s3_endpoint_url")
            )
            done.append(f"model {model} ready in {folder}")
        return done

    @contextlib.asynccontextmanager
    async def provision(
        self, worker_id: str, deployment: dict[str, Any], work_dir: Path
    ) -> AsyncIterator[Handle]:
        adapter = adapter_for(deployment["server"])
        port = free_port(HOST)
        model_path = _model_path(deployment)
        params = deployment.get("params") or {}
        protocols = adapter.served_protocols(params)
        grpc_port = free_port(HOST) if "tgis" in protocols else None
        argv = adapter.command(params, model_path, HOST, port)
        if grpc_port is not None:
            argv += adapter.grpc_args(grpc_port)
        env = {**os.environ, **adapter.env(params), **(params.get("env") or {})}
        server = await process.start(
            argv, env, work_dir / "server.log", self.run_dir / PID_DIR / f"{worker_id}.json"
        )
        exited = asyncio.ensure_future(server.process.wait())
        try:
            problem = await wait_ready(
                HOST, port, adapter.readiness_path, deployment["startup_timeout_s"], exited
            )
            if problem:
                raise ServerStartError(
                    f"{deployment['name']} ({deployment['server']}) {problem}; log"
                    f" {server.log_path}:\n{server.log_tail()}"
                )
            handle = Handle(
                Endpoint(
                    base_url=f"http://{HOST}:{port}",
                    protocols=protocols,
                    model=adapter.served_model_name(deployment),
                    server_kind=deployment["server"],
                    tokenizer=str(model_path) if model_path else None,
                    metrics_path=adapter.metrics_path,
                    grpc_target=f"{HOST}:{grpc_port}" if grpc_port is not None else None,
                ),
                info={
                    "pid": server.pid,
                    "argv": argv,
                    "port": port,
                    **({"grpc_port": grpc_port} if grpc_port is not None else {}),
                    "version": await _version(port, deployment["server"]),
                },
            )

            def on_exit(task: asyncio.Future[int]) -> None:
                if not handle.died.done() and not task.cancelled():
                    handle.died.set_result(
                        f"{deployment['name']} exited with code {task.result()} while serving;"
                        f" log {server.log_path}:\n{server.log_tail()}"
                    )

            exited.add_done_callback(on_exit)
            yield handle
        finally:
            await process.stop(server)
            exited.cancel()


def _model_path(deployment: dict[str, Any]) -> Path | None:
    """The local folder of a real server's model (prepared in the prepare phase)."""
    if not _reads_local_weights(deployment):
        return None
    source = parse_source(str(deployment["model"]))
    if source.kind == "hub":
        return None
    return resolve_model(
        str(deployment["model"]),
        endpoint_url=deployment.get("s3_endpoint_url"),
        prepare_bundled=False,
    )


async def _version(port: int, server: str) -> str:
    """The server's version: its ``/version`` (vLLM, TGI) or, for testbed's own servers and
    servers that do not say, testbed's version and the kind."""
    status, body = await http_get(HOST, port, "/version")
    if status == 200:
        with contextlib.suppress(ValueError, AttributeError):
            version = json.loads(body).get("version")
            if version:
                return f"{server} {version}"
    return f"{server} (testbed {__version__})"


def _reads_local_weights(deployment: dict[str, Any]) -> bool:
    """A child process here that reads model weights from a folder of this machine."""
    kind = kind_of(deployment)
    return kind.local and kind.weights
