"""One container's life on the process-kubelet: pull, create, start, probe, exit, restart.

A container of a known image runs as a host process (``kubelet.process``); an unknown
image runs no process and moves through KWOK-like stages: Running (and Ready) at once, and
``Completed`` after the pod's ``emulator.testbed.io/run-seconds`` if it has one. Injected
faults (``machinery.faults``) replace the pull, or end the run as a crash or an OOM kill.
After an exit the ``restartPolicy`` decides; restarts wait the kubelet's back-off (none for
the first, then ``backoff_s`` doubling up to ``backoff_max_s``), shown as CrashLoopBackOff.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubefacts.process_group import group_rss_bytes
from kubefacts.quantity import amount
from kubemu.kubelet import process as proc
from kubemu.kubelet.logs import LogBook, RunLog
from kubemu.kubelet.probing import supervise
from kubemu.kubelet.status import ContainerRecord
from kubemu.machinery.faults import Fault
from kubemu.storage.meta import now


@dataclass(frozen=True)
class KubeletSettings:
    """Timing of the process-kubelet (seconds)."""

    #: First crash back-off (the real kubelet's is 10 s), doubling per restart.
    backoff_s: float = 10.0
    backoff_max_s: float = 300.0
    #: How long an emulated image pull takes.
    pull_s: float = 0.0
    #: How often a container's memory is compared with its limit.
    memory_check_s: float = 1.0


Emit = Callable[[str, str, str], None]  # (type, reason, note)


@dataclass
class Launch:
    """What the pod gives a container to run: argv (None: unknown image), env, cwd, ports."""

    argv: list[str] | None
    env: dict[str, str]
    cwd: Path | None
    ports: dict[int, int]
    start_error: str = ""
    note: str = ""  # the first line of every run's log (what a stand-in plays)


class ContainerRunner:
    """Runs one container until it is done or stopped; its status lives in :attr:`record`."""

    def __init__(
        self,
        spec: Mapping[str, Any],
        record: ContainerRecord,
        launch: Launch,
        where: tuple[str, str, str],
        fault: Fault | None,
        run_seconds: float | None,
        settings: KubeletSettings,
        logbook: LogBook,
        emit: Emit,
        changed: Callable[[], None],
    ) -> None:
        self.spec, self.record, self.launch = spec, record, launch
        self.namespace, self.pod, self.uid = where
        self.fault, self.run_seconds, self.settings = fault, run_seconds, settings
        self.logbook, self.emit, self.changed = logbook, emit, changed
        self.host: proc.HostProcess | None = None
        self.stopping = False
        #: The pod's terminationGracePeriodSeconds (a probe's kill waits it too).
        self.grace_s = 30.0
        self._background: asyncio.Task[int] | None = None

    @property
    def name(self) -> str:
        return self.record.name

    async def run(self, restart_policy: str) -> int:
        """Pull, then run and restart per ``restart_policy``; the last exit code."""
        await self._pull()
        while True:
            code = await self._run_once()
            restart = restart_policy == "Always" or (restart_policy == "OnFailure" and code != 0)
            if self.record.init and code == 0:
                restart = False
            if self.stopping or not restart:
                self.record.done = True
                self.changed()
                return code
            await self._back_off()

    async def stop(self, grace_s: float) -> None:
        """End the container (the pod is being deleted): SIGTERM, grace, SIGKILL."""
        self.stopping = True
        if self.host is not None and self.host.process.returncode is None:
            self.emit("Normal", "Killing", f"Stopping container {self.name}")
            await proc.stop(self.host, grace_s)

    def kill_now(self) -> None:
        if self.host is not None:
            proc.kill_now(self.host, "shutdown")

    async def _pull(self) -> None:
        image = self.record.image
        if self.fault is not None and self.fault.kind == "image-pull":
            await self._fail_pull(image)
        self.emit("Normal", "Pulling", f'Pulling image "{image}"')
        if self.settings.pull_s:
            await asyncio.sleep(self.settings.pull_s)
        self.emit(
            "Normal",
            "Pulled",
            f'Successfully pulled image "{image}" in {self.settings.pull_s * 1000:.0f}ms',
        )

    async def _fail_pull(self, image: str) -> None:
        """ErrImagePull, then ImagePullBackOff, forever (a pull that cannot succeed)."""
        delay = self.settings.backoff_s
        detail = (
            f'failed to pull and unpack image "{image}": failed to resolve reference'
            f' "{image}": not found (emulator.testbed.io/fault=image-pull)'
        )
        while not self.stopping:
            self.emit("Normal", "Pulling", f'Pulling image "{image}"')
            self.emit("Warning", "Failed", f'Failed to pull image "{image}": {detail}')
            self.emit("Warning", "Failed", "Error: ErrImagePull")
            self.record.waiting("ErrImagePull", f"rpc error: code = NotFound desc = {detail}")
            self.changed()
            await asyncio.sleep(min(1.0, delay))
            self.emit("Normal", "BackOff", f'Back-off pulling image "{image}"')
            self.emit("Warning", "Failed", "Error: ImagePullBackOff")
            self.record.waiting("ImagePullBackOff", f'Back-off pulling image "{image}": {detail}')
            self.changed()
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.settings.backoff_max_s)
        raise asyncio.CancelledError

    async def _run_once(self) -> int:
        record = self.record
        log = self.logbook.new_run(self.namespace, self.pod, self.uid, self.name)
        started_at = now()
        record.container_id = f"containerd://{secrets.token_hex(32)}"
        self.emit("Normal", "Created", f"Created container: {self.name}")
        if self.launch.start_error:
            return self._start_failed(log, started_at, self.launch.start_error)
        if self.launch.argv is None:
            return await self._run_stage(log, started_at)
        if self.stopping:
            raise asyncio.CancelledError
        if self.launch.note:
            log.write(self.launch.note + "\n", "stderr")
        try:
            self.host = await proc.spawn(self.launch.argv, self.launch.env, self.launch.cwd, log)
        except OSError as exc:
            return self._start_failed(log, started_at, str(exc))
        if self.stopping:  # the pod was deleted while the process started
            proc.kill_now(self.host, "deleted")
        self.emit("Normal", "Started", f"Started container {self.name}")
        record.running(started_at, record.container_id)
        record.ready = not ({"readinessProbe", "startupProbe"} & set(self.spec))
        self.changed()
        watchers = [
            asyncio.create_task(self._watch_memory(self.host)),
            asyncio.create_task(supervise(self, self.host)),
        ]
        if self.fault is not None and self.fault.kind in ("crash", "oom"):
            watchers.append(asyncio.create_task(self._inject(self.host, self.fault)))
        try:
            code = await self.host.wait()
        finally:
            for task in watchers:
                task.cancel()
        reason = "Completed" if code == 0 else "Error"
        if self.host.killed_for == "oom":
            code, reason = 137, "OOMKilled"
        elif self.host.killed_for == "crash":
            code, reason = 1, "Error"
        self._exited(code, reason, started_at, log)
        return code

    async def _run_stage(self, log: RunLog, started_at: str) -> int:
        """An unknown image: no process, only the stages (see the module docstring)."""
        self.emit("Normal", "Started", f"Started container {self.name}")
        self.record.running(started_at, self.record.container_id)
        self.record.ready = True
        self.changed()
        fault = self.fault if self.fault and self.fault.kind in ("crash", "oom") else None
        if fault is not None:
            await asyncio.sleep(fault.seconds)
            log.write(f"emulated {fault.kind} (emulator.testbed.io/fault={fault.kind})")
            code, reason = (137, "OOMKilled") if fault.kind == "oom" else (1, "Error")
        elif self.run_seconds is not None:
            await asyncio.sleep(self.run_seconds)
            code, reason = 0, "Completed"
        else:
            await asyncio.Event().wait()  # runs until the pod is deleted
            code, reason = 0, "Completed"
        self._exited(code, reason, started_at, log)
        return code

    def _start_failed(self, log: RunLog, started_at: str, message: str) -> int:
        log.write(message, "stderr")
        self.emit("Warning", "Failed", f"Error: failed to start container {self.name!r}: {message}")
        self.record.terminated(128, "StartError", started_at, message)
        log.close()
        self.changed()
        return 128

    def _exited(self, code: int, reason: str, started_at: str, log: RunLog) -> None:
        log.close()
        self.record.terminated(code, reason, started_at)
        self.changed()

    async def _back_off(self) -> None:
        record = self.record
        delay = 0.0
        if record.restart_count > 0:
            delay = min(
                self.settings.backoff_s * 2 ** (record.restart_count - 1),
                self.settings.backoff_max_s,
            )
        record.last_state = dict(record.state)
        if delay > 0:
            message = (
                f"back-off {delay:g}s restarting failed container={self.name}"
                f" pod={self.pod}_{self.namespace}({self.uid})"
            )
            record.waiting("CrashLoopBackOff", message)
            self.emit(
                "Warning",
                "BackOff",
                "Back-off restarting failed container"
                f" {self.name} in pod {self.pod}_{self.namespace}({self.uid})",
            )
            self.changed()
            await asyncio.sleep(delay)
        record.restart_count += 1

    def kill_for_probe(self, host: proc.HostProcess, kind: str) -> None:
        """A liveness or startup probe failed: stop the container so that it restarts."""
        if host.killed_for is not None:
            return
        host.killed_for = kind
        note = f"Container {self.name} failed {kind} probe, will be restarted"
        self.emit("Normal", "Killing", note)
        self._background = asyncio.create_task(proc.stop(host, self.grace_s))

    async def _inject(self, host: proc.HostProcess, fault: Fault) -> None:
        await asyncio.sleep(fault.seconds)
        proc.kill_now(host, fault.kind)

    async def _watch_memory(self, host: proc.HostProcess) -> None:
        """OOM-kill the container when its processes' memory exceeds its limit."""
        limit_text = ((self.spec.get("resources") or {}).get("limits") or {}).get("memory")
        if limit_text is None:
            return
        limit = amount("memory", limit_text)
        while host.process.returncode is None:
            rss = await asyncio.to_thread(group_rss_bytes, host.pid)
            if rss > limit:
                proc.kill_now(host, "oom")
                return
            await asyncio.sleep(self.settings.memory_check_s)


def stop_all(runners: Sequence[ContainerRunner]) -> None:
    """SIGKILL every container process at once (the emulator is shutting down)."""
    for runner in runners:
        with contextlib.suppress(ProcessLookupError):
            runner.kill_now()
