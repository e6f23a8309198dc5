"""One pod on the process-kubelet: init containers in order, then the app containers together.

Before any container, the volume drivers plugged in (``Host.drivers``: Datashim's copies
a Dataset's bucket into its claim, ``standins.datashim_mounts``) fill the pod's volumes; one
that cannot is a Warning ``FailedMount``, retried.

The runtime owns its containers' tasks and processes. Whenever a container's state changes
it calls ``publish`` with the pod's new status (``kubelet.status``); the kubelet writes it.
An init container that fails under ``restartPolicy: Never`` fails the pod; a bad
configuration (missing Secret key, bad fault annotation) leaves the container waiting with
``CreateContainerConfigError``, as the real kubelet does.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubefacts.errors import InputError
from kubemu.kubelet.container import ContainerRunner, KubeletSettings
from kubemu.kubelet.environment import ConfigError, Lookup
from kubemu.kubelet.images import ImageRules
from kubemu.kubelet.logs import LogBook
from kubemu.kubelet.sandbox import (
    MountError,
    Sandbox,
    VolumeDriver,
    launch_for,
    make_sandbox,
)
from kubemu.kubelet.status import ContainerRecord, phase, pod_status
from kubemu.machinery.faults import Fault, FaultRule, fault_of, run_seconds
from kubemu.storage.meta import now

MOUNT_RETRY_S = 5.0
Emit = Callable[[str, str, str, str], None]  # (type, reason, note, fieldPath)


@dataclass(frozen=True)
class Host:
    """What every pod runtime shares: settings, image rules, fault rules, logs, state dir."""

    settings: KubeletSettings
    rules: ImageRules
    fault_rules: tuple[FaultRule, ...]
    logbook: LogBook
    state_dir: Path
    lookup: Lookup
    #: The Service variables a pod's containers get (``kubelet.services``; the kubelet sets it).
    services: Callable[[Mapping[str, Any]], Mapping[str, str]] = lambda _pod: {}
    #: Volume drivers that fill a pod's volumes before its containers start (the plane's).
    drivers: tuple[VolumeDriver, ...] = ()


class PodRuntime:
    """Runs one pod's containers; :meth:`status` is its status as the kubelet reports it."""

    def __init__(
        self,
        pod: Mapping[str, Any],
        host: Host,
        emit: Emit,
        publish: Callable[[PodRuntime], None],
    ) -> None:
        self.pod = pod
        self.host = host
        self.emit = emit
        self.publish = publish
        spec = pod.get("spec") or {}
        self.restart_policy = str(spec.get("restartPolicy") or "Always")
        self.records = [
            ContainerRecord(str(c["name"]), str(c.get("image", "")), init=True)
            for c in spec.get("initContainers") or []
        ] + [ContainerRecord(str(c["name"]), str(c.get("image", ""))) for c in spec["containers"]]
        self.runners: list[ContainerRunner] = []
        self.sandbox: Sandbox | None = None
        self.init_failed = False
        self.started_at = now()
        self.stopped = asyncio.Event()
        self.stopping = False

    @property
    def key(self) -> tuple[str, str]:
        meta = self.pod["metadata"]
        return str(meta.get("namespace")), str(meta["name"])

    @property
    def ports(self) -> dict[int, int]:
        return dict(self.sandbox.ports) if self.sandbox else {}

    def status(self, previous: Mapping[str, Any]) -> dict[str, Any]:
        extra = {
            "hostIP": "127.0.0.1",
            "hostIPs": [{"ip": "127.0.0.1"}],
            "podIP": "127.0.0.1",
            "podIPs": [{"ip": "127.0.0.1"}],
            "startTime": self.started_at,
        }
        pod_phase = phase(self.records, self.restart_policy, self.init_failed)
        return pod_status(previous, self.records, pod_phase, extra)

    @property
    def finished(self) -> bool:
        return phase(self.records, self.restart_policy, self.init_failed) in ("Succeeded", "Failed")

    async def run(self) -> None:
        """Until every container is done (a pod that runs forever: until cancelled)."""
        self.publish(self)
        try:
            fault = fault_of(self.pod, self.host.fault_rules)
            self.sandbox = make_sandbox(
                self.pod, self.host.state_dir, self.host.lookup, self.host.rules
            )
        except (ConfigError, InputError) as exc:
            self._config_error(str(exc))
            return
        await self._fill_volumes(self.sandbox)
        if self.stopping:
            return
        seconds = run_seconds(self.pod)
        spec = self.pod["spec"]
        inits = list(spec.get("initContainers") or [])
        for container, record in zip(inits, self.records, strict=False):
            runner = self._runner(container, record, fault, seconds)
            if runner is None:
                return
            code = await runner.run("Never" if self.restart_policy == "Never" else "OnFailure")
            if code != 0:
                self.init_failed = True
                self.publish(self)
                return
        apps = [r for r in self.records if not r.init]
        runners = [
            self._runner(c, r, fault, seconds)
            for c, r in zip(spec["containers"], apps, strict=True)
        ]
        if any(r is None for r in runners):
            return
        async with asyncio.TaskGroup() as group:
            for runner in runners:
                assert runner is not None
                group.create_task(runner.run(self.restart_policy))

    def _runner(
        self,
        container: Mapping[str, Any],
        record: ContainerRecord,
        fault: Fault | None,
        seconds: float | None,
    ) -> ContainerRunner | None:
        assert self.sandbox is not None
        if self.stopping:
            return None
        try:
            launch = launch_for(
                container,
                self.pod,
                self.sandbox,
                self.host.rules,
                self.host.lookup,
                self.host.services(self.pod),
            )
        except ConfigError as exc:
            self._config_error(str(exc), record)
            return None
        group = "initContainers" if record.init else "containers"
        field_path = f"spec.{group}{{{record.name}}}"
        hits = fault if fault is not None and fault.hits(record.name, record.init) else None
        runner = ContainerRunner(
            container,
            record,
            launch,
            (self.key[0], self.key[1], str(self.pod["metadata"]["uid"])),
            hits,
            seconds,
            self.host.settings,
            self.host.logbook,
            lambda t, r, n: self.emit(t, r, n, field_path),
            lambda: self.publish(self),
        )
        runner.grace_s = float(self.pod["spec"].get("terminationGracePeriodSeconds", 30))
        self.runners.append(runner)
        return runner

    async def _fill_volumes(self, sandbox: Sandbox) -> None:
        """Let each volume driver fill the pod's volumes (Datashim's copies the buckets of
        Dataset claims in); a failure is a Warning ``FailedMount`` and a retry every
        :data:`MOUNT_RETRY_S`, as the kubelet retries a volume that would not mount."""
        while not self.stopping:
            try:
                for fill in self.host.drivers:
                    await fill(self.pod, sandbox.volumes, self.host.lookup)
                return
            except MountError as exc:
                self.emit("Warning", "FailedMount", str(exc), "")
            await asyncio.sleep(MOUNT_RETRY_S)

    def _config_error(self, message: str, record: ContainerRecord | None = None) -> None:
        for target in [record] if record else [r for r in self.records if not r.done]:
            target.waiting("CreateContainerConfigError", message)
        self.emit("Warning", "Failed", f"Error: {message}", "")
        self.publish(self)

    async def stop(self, grace_s: float) -> None:
        """Stop every container (SIGTERM, grace, SIGKILL) and remove the sandbox."""
        self.stopping = True
        await asyncio.gather(*(runner.stop(grace_s) for runner in self.runners))
        if self.sandbox is not None:
            self.sandbox.remove()
        self.stopped.set()

    def kill_now(self) -> None:
        for runner in self.runners:
            with contextlib.suppress(ProcessLookupError):
                runner.kill_now()
