"""The local backend: each worker's server is a child process on 127.0.0.1 on a free port.

Readiness is awaited with the deployment's timeout; the server's output goes to
``server.log`` in the worker's directory; a server that exits at any moment resolves the
handle's ``died`` future with the tail of its log, which the pipeline reports as an
infrastructure ERROR. Leaving :meth:`provision` always stops the whole process group.

GPUs (``gpus.py``): the machine's are found once per run, each worker asking
``resources.gpu`` gets its own devices through ``CUDA_VISIBLE_DEVICES``, a worker asking more
than there are is skipped with the numbers, and the run directory keeps the assignment in
``gpus.json``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from pathlib import Path

from testbed import __version__
from testbed.backends.base import Backend, Handle
from testbed.backends.local import capture, gpus
from testbed.backends.local.ports import free_port
from testbed.backends.local.readiness import http_get, wait_ready
from testbed.clients.endpoint import Endpoint
from testbed.config.backend_settings import BackendSettings, LocalSettings
from testbed.config.deployments import AnyDeployment, ServerDeployment, worker_gpus
from testbed.config.server_kinds import kind_of
from testbed.core import processes
from testbed.core.errors import EXIT_INPUT, InputError, ServerRefused, ServerStartError
from testbed.results.rundir import PID_DIR
from testbed.servers.adapters import adapter_for
from testbed.servers.adapters.base import own_env
from testbed.servers.models import parse_source, resolve_model
from testbed.servers.startup_log import root_cause

HOST = "127.0.0.1"
GPUS_FILE = "gpus.json"


class LocalBackend(Backend):
    """Servers as child processes of this machine."""

    name = "local"
    ends_local_processes = True  # its servers are this machine's recorded process groups

    def __init__(
        self,
        run_dir: Path,
        base_dir: Path | None = None,
        config: LocalSettings | None = None,
        environ: dict[str, str] | None = None,
        gpu_probe: gpus.DeviceProbe | None = None,
    ) -> None:
        self.run_dir = run_dir
        self._gpu_probe = gpu_probe  # None: ask this machine (gpus.probe_machine)
        self.base_dir = base_dir or Path.cwd()  # relative paths of the campaign start here
        settings = config or LocalSettings()
        self.declared_gpus = settings.gpus
        self.share_gpus = settings.share_gpus
        self._environ = environ  # None: this process's, read when a server starts
        self._inventory: gpus.Inventory | None = None
        self._assignment = gpus.Assignment()

    @property
    def environ(self) -> dict[str, str]:
        return dict(os.environ if self._environ is None else self._environ)

    def inventory(self) -> gpus.Inventory:
        """The GPUs this run may use, found once (``nvidia-smi -L`` runs here)."""
        if self._inventory is None:
            self._inventory = gpus.discover(self.declared_gpus, self.environ, self._gpu_probe)
        return self._inventory

    async def infeasible(
        self, workers: Mapping[str, AnyDeployment]
    ) -> tuple[dict[str, str], list[str]]:
        """Assign GPUs to the workers; those asking more than the run has are skipped."""
        inventory = await asyncio.to_thread(self.inventory)
        wanted = {w: worker_gpus(c) for w, c in workers.items()}
        self._assignment = gpus.assign(wanted, inventory)
        notes = []
        if any(wanted.values()) or inventory.devices:
            ids = ", ".join(map(str, inventory.ids)) or "none"
            notes.append(f"GPUs by {inventory.source}: {ids}")
            notes += list(inventory.notes)
            notes += [
                f"{w} gets GPU {', '.join(map(str, d))}"
                for w, d in self._assignment.devices.items()
            ]
        record = {
            **inventory.to_json(),
            **self._assignment.to_json(),
            "share_gpus": self.share_gpus,
        }
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / GPUS_FILE).write_text(json.dumps(record, indent=2) + "\n")
        return dict(self._assignment.unfit), notes

    def worker_devices(self, worker_id: str) -> frozenset[int]:
        if self.share_gpus:
            return frozenset()
        return frozenset(self._assignment.devices.get(worker_id, ()))

    def conflict(self, worker_ids: tuple[str, ...]) -> str:
        if self.share_gpus:
            return ""
        held: dict[int, str] = {}
        for worker in worker_ids:
            for device in self._assignment.devices.get(worker, ()):
                if device in held:
                    return (
                        f"{held[device]} and {worker} must run at once but both are given GPU"
                        f" {device} ({len(self.inventory().devices)} GPU(s) for"
                        f" {len(worker_ids)} workers) — give them fewer GPUs, or set"
                        " backend.share_gpus: true"
                    )
                held[device] = worker
        return ""

    def _devices(self, worker_id: str, deployment: ServerDeployment) -> tuple[int, ...]:
        """The worker's devices: assigned for the run, or (a lone server) assigned now."""
        wanted = deployment.resources.gpu_count
        if not wanted:
            return ()
        if worker_id not in self._assignment.devices:
            alone = gpus.assign({worker_id: wanted}, self.inventory())
            if worker_id in alone.unfit:
                raise ServerStartError(f"{deployment.name} {alone.unfit[worker_id]}")
            self._assignment.devices[worker_id] = alone.devices[worker_id]
        return self._assignment.devices[worker_id]

    async def cleanup_leftovers(self, run_dir: Path) -> list[str]:
        return processes.kill_leftovers(run_dir / PID_DIR)

    @classmethod
    def preflight(cls, config: BackendSettings, deployments: Sequence[AnyDeployment]) -> None:
        """The GPU ids ``backend.gpus`` declares must be GPUs this machine offers."""
        del deployments
        declared = _local(config).gpus
        if declared is not None:
            gpus.discover(declared, os.environ)

    @classmethod
    def for_run(
        cls, run_dir: Path, config: BackendSettings, base_dir: Path, keep: bool = False
    ) -> LocalBackend:
        del keep  # local servers never outlive the run
        return cls(run_dir, base_dir, _local(config))

    async def capture_state(
        self, folder: Path, workers: Collection[str] | None = None, namespaces: Sequence[str] = ()
    ) -> list[str]:
        """The workers' process groups as ``ps`` shows them and their logs' ends (no
        namespaces here: validation refuses them)."""
        del namespaces
        return await asyncio.to_thread(
            capture.capture, self.run_dir, self.run_dir / PID_DIR, folder, workers
        )

    async def prepare(self, deployments: Sequence[AnyDeployment]) -> list[str]:
        done = []
        seen: set[str] = set()
        for deployment in deployments:
            model = deployment.model
            if not _reads_local_weights(deployment) or model in seen:
                continue
            assert isinstance(deployment, ServerDeployment)  # only these read weights here
            seen.add(model)
            folder = await asyncio.to_thread(
                resolve_model, model, endpoint_url=deployment.s3_endpoint_url
            )
            done.append(f"model {model} ready in {folder}")
        return done

    @contextlib.asynccontextmanager
    async def provision(
        self, worker_id: str, deployment: AnyDeployment, work_dir: Path
    ) -> AsyncIterator[Handle]:
        if not isinstance(deployment, ServerDeployment):  # validation refuses these here
            raise InputError(f"{deployment.name}: the local backend runs no {deployment.server}")
        adapter = adapter_for(deployment.server)
        port = free_port(HOST)
        model_path = _model_path(deployment)
        params = deployment.params
        protocols = adapter.served_protocols(params)
        grpc_port = free_port(HOST) if "tgis" in protocols else None
        argv = adapter.command(params, model_path, HOST, port)
        if grpc_port is not None:
            argv += adapter.grpc_args(grpc_port)
        devices = self._devices(worker_id, deployment)
        machine_has_gpus = bool(devices) or bool(self._inventory and self._inventory.devices)
        env = {
            **self.environ,
            **gpus.device_environment(devices, machine_has_gpus),
            **adapter.env(params, gpus=len(devices)),
            **own_env(params),
        }
        server = await processes.start(
            argv, env, work_dir / "server.log", self.run_dir / PID_DIR / f"{worker_id}.json"
        )
        exited = asyncio.ensure_future(server.process.wait())
        try:
            problem = await wait_ready(
                HOST, port, adapter.readiness_path, deployment.startup_timeout_s, exited
            )
            if problem:
                # exit code 2 is the server's "bad input" (testbed's own servers, argparse)
                refused = exited.done() and exited.result() == EXIT_INPUT
                raise (ServerRefused if refused else ServerStartError)(
                    f"{deployment.name} ({deployment.server}) {problem}"
                    f"{_because(server)}; log {server.log_path}:\n{server.log_tail()}"
                )
            handle = Handle(
                Endpoint(
                    base_url=f"http://{HOST}:{port}",
                    protocols=protocols,
                    model=adapter.served_model_name(deployment),
                    server_kind=deployment.server,
                    tokenizer=str(model_path) if model_path else None,
                    metrics_path=adapter.metrics_path,
                    grpc_target=f"{HOST}:{grpc_port}" if grpc_port is not None else None,
                ),
                info={
                    "pid": server.pid,
                    "argv": argv,
                    "port": port,
                    **({"gpus": list(devices)} if devices else {}),
                    **({"grpc_port": grpc_port} if grpc_port is not None else {}),
                    "version": await _version(port, deployment.server),
                },
            )

            def on_exit(task: asyncio.Future[int]) -> None:
                if not handle.died.done() and not task.cancelled():
                    handle.died.set_result(
                        f"{deployment.name} exited with code {task.result()} while serving"
                        f"{_because(server)}; log {server.log_path}:\n{server.log_tail()}"
                    )

            exited.add_done_callback(on_exit)
            yield handle
        finally:
            await processes.stop(server)
            exited.cancel()


def _because(server: processes.ServerProcess) -> str:
    """``: <the root cause>`` from the server's log, or nothing when the log names none."""
    try:
        text = server.log_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    cause = root_cause(text)
    return f": {cause}" if cause else ""


def _model_path(deployment: ServerDeployment) -> Path | None:
    """The local folder of a real server's model (prepared in the prepare phase)."""
    if not _reads_local_weights(deployment):
        return None
    source = parse_source(deployment.model)
    if source.kind == "hub":
        return None
    return resolve_model(
        deployment.model, endpoint_url=deployment.s3_endpoint_url, prepare_bundled=False
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


def _reads_local_weights(deployment: AnyDeployment) -> bool:
    """A child process here that reads model weights from a folder of this machine."""
    kind = kind_of(deployment)
    return kind.local and kind.weights


def _local(config: BackendSettings) -> LocalSettings:
    """The campaign's ``backend:`` section as this backend's settings (validation chose
    this backend by its ``kind``, so anything else is a caller's bug)."""
    if not isinstance(config, LocalSettings):
        raise TypeError(f"the local backend got backend settings of kind {config.kind}")
    return config
