"""The emulated control plane beside the API server: controllers, scheduler and kubelet.

:class:`ControlPlane` owns one task per component and runs them until cancelled; on the
way out the kubelet kills every container process it started. :func:`attach`
starts it beside an :class:`~kubemu.Emulator` and wires it in: the kubelet's
``pods/log``, ``exec`` and ``portforward`` handlers into the API server, Datashim's
operator, webhook and volume driver (``standins``) into the kubelet and the store. Every
part is named here, so the import contract sees the whole plane.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from kubemu.controllers import leaderworkersets
from kubemu.controllers.daemonsets import DaemonSetController
from kubemu.controllers.deployments import DeploymentController
from kubemu.controllers.jobs import JobController
from kubemu.controllers.podgroups import PodGroupController
from kubemu.controllers.replicasets import ReplicaSetController
from kubemu.controllers.statefulsets import StatefulSetController
from kubemu.kubelet.container import KubeletSettings
from kubemu.kubelet.images import ImageRules
from kubemu.kubelet.kubelet import Kubelet
from kubemu.kubelet.logs import LogBook
from kubemu.kubelet.pod import Host
from kubemu.kubelet.serving import register
from kubemu.machinery.faults import FaultRule
from kubemu.scheduler.scheduler import Scheduler
from kubemu.standins import datashim, datashim_mounts, kserve

if TYPE_CHECKING:
    from kubemu.apiserver.server import Emulator
    from kubemu.storage.store import Store


class Controller(Protocol):
    async def run(self) -> None: ...


@dataclass(frozen=True)
class PlaneSettings:
    """Everything the control plane is configured with (one place, passed explicitly)."""

    #: Where pod scratch dirs, PVC data and container logs live (None: a temporary
    #: directory, removed when the emulator stops).
    state_dir: Path | None = None
    kubelet: KubeletSettings = field(default_factory=KubeletSettings)
    images: ImageRules = field(default_factory=ImageRules)
    #: Faults for every pod a rule matches (``--fault``), see ``machinery.faults``.
    faults: tuple[FaultRule, ...] = ()
    #: Serve Datashim's Dataset kind and act as its operator and webhook (``--datashim``).
    datashim: bool = False
    #: Serve KServe's InferenceService kind and play its controller (``--kserve-stand-in``).
    kserve_stand_in: bool = False
    #: Program Gateways of the class testbed owns and route to InferencePools with the EPP
    #: configuration the stack gives (``--gateway-stand-in``, ``standins.gateway``).
    gateway_stand_in: bool = False


class ControlPlane:
    """Scheduler, ReplicaSet/Deployment/Job controllers (and Datashim's when asked) and the
    process-kubelet."""

    def __init__(self, store: Store, settings: PlaneSettings) -> None:
        if settings.state_dir is None:
            raise ValueError("ControlPlane needs a state_dir (attach() makes a temporary one)")
        self.store = store
        self.settings = settings
        self.state_dir: Path = settings.state_dir
        logbook = LogBook(settings.state_dir / "logs")
        host = Host(
            settings.kubelet,
            settings.images,
            settings.faults,
            logbook,
            settings.state_dir,
            Kubelet.lookup_in(store, datashim_mounts.LOOKUP_KINDS),
            # A claim that names a Dataset gets its bucket copied in, as it always has (a
            # Dataset only exists with --datashim; other claims are left alone).
            drivers=(datashim_mounts.fill,),
        )
        self.kubelet = Kubelet(store, host)
        self.scheduler = Scheduler(store, settings.faults)
        self.controllers: tuple[Controller, ...] = (
            DeploymentController(store),
            ReplicaSetController(store),
            DaemonSetController(store),
            StatefulSetController(store),
            JobController(store),
            PodGroupController(store),
            # LWS is no built-in, but llm-d's clusters have it: served as if installed
            leaderworkersets.install(store),
        )
        if settings.datashim:
            self.controllers += (datashim.install(store),)
        if settings.kserve_stand_in:
            self.controllers += (kserve.install(store),)
        if settings.gateway_stand_in:
            from kubemu.standins.gateway import GatewayStandIn

            self.controllers += (GatewayStandIn(store, self._host_ports),)

    def _host_ports(self, namespace: str, name: str) -> dict[int, int]:
        runtime = self.kubelet.runtime(namespace, name)
        return runtime.ports if runtime is not None else {}

    @property
    def logbook(self) -> LogBook:
        return self.kubelet.host.logbook

    async def shutdown(self, grace_s: float = 5.0) -> None:
        """Stop every pod's containers (SIGTERM, up to ``grace_s``, SIGKILL)."""
        await self.kubelet.stop_all(grace_s)

    async def run(self) -> None:
        """Run every component until cancelled; container processes die with it."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self.kubelet.run(), name="kubelet")
                group.create_task(self.scheduler.run(), name="scheduler")
                for controller in self.controllers:
                    group.create_task(controller.run(), name=type(controller).__name__)
        finally:
            self.kubelet.kill_all()


def attach(
    emulator: Emulator, settings: PlaneSettings | None = None, grace_s: float = 5.0
) -> ControlPlane:
    """Start a control plane beside ``emulator``, in its (running) event loop.

    Registers the ``pods/log`` and ``pods/portforward`` subresources and a shutdown hook
    that stops every container (SIGTERM, ``grace_s``, SIGKILL) before the server closes.
    Without ``settings`` the state (pod scratch dirs, PVC data, logs) lives in a temporary
    directory removed at shutdown.
    """
    scratch: Path | None = None
    settings = settings or PlaneSettings()
    if settings.state_dir is None:
        scratch = Path(tempfile.mkdtemp(prefix="testbed-emulator-"))
        settings = dataclasses.replace(settings, state_dir=scratch)
    plane = ControlPlane(emulator.store, settings)
    task = asyncio.get_running_loop().create_task(plane.run(), name="control-plane")
    register(emulator, plane.kubelet)

    async def stop() -> None:
        try:
            await plane.shutdown(grace_s)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)

    emulator.on_shutdown(stop)
    return plane
