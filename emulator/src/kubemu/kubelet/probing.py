"""A running container's probes, in the kubelet's order: startup first, then readiness and liveness.

While a ``startupProbe`` has not succeeded the container is not ``started``, not ready, and
no other probe runs; ``failureThreshold`` failures in a row kill it ("failed startup probe,
will be restarted"). Then ``readinessProbe`` drives ``ready`` (without one the container is
ready once started) and ``livenessProbe`` kills it after ``failureThreshold`` failures. Each
failure is an ``Unhealthy`` warning event, worded as the kubelet words it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any, Protocol

from kubemu.kubelet.probes import Timing, check
from kubemu.kubelet.process import HostProcess
from kubemu.kubelet.status import ContainerRecord


class _Launched(Protocol):
    @property
    def ports(self) -> Mapping[int, int]: ...

    @property
    def env(self) -> Mapping[str, str]: ...


class ContainerRunner(Protocol):
    """What the probes read and do of the container they watch (``container.ContainerRunner``)."""

    @property
    def spec(self) -> Mapping[str, Any]: ...

    @property
    def record(self) -> ContainerRecord: ...

    @property
    def launch(self) -> _Launched: ...

    def emit(self, type_: str, reason: str, note: str, /) -> None: ...

    def changed(self) -> None: ...

    def kill_for_probe(self, host: HostProcess, kind: str) -> None: ...


async def supervise(runner: ContainerRunner, host: HostProcess) -> None:
    """Run the container's probes until it exits (the caller cancels this task then)."""
    spec = runner.spec
    startup = spec.get("startupProbe")
    if startup:
        runner.record.started = False
        runner.changed()
        if not await _passes(runner, startup):
            runner.kill_for_probe(host, "startup")
            return
        runner.record.started = True
        runner.record.ready = "readinessProbe" not in spec
        runner.changed()
    loops = []
    readiness = spec.get("readinessProbe")
    if readiness:

        def ready(ok: bool) -> None:
            if runner.record.ready != ok and "running" in runner.record.state:
                runner.record.ready = ok
                runner.changed()

        loops.append(probe_loop(runner, readiness, "Readiness", ready))
    liveness = spec.get("livenessProbe")
    if liveness:

        def alive(ok: bool) -> None:
            if not ok:
                runner.kill_for_probe(host, "liveness")

        loops.append(probe_loop(runner, liveness, "Liveness", alive))
    await asyncio.gather(*loops)


async def _passes(runner: ContainerRunner, probe: Mapping[str, Any]) -> bool:
    """The startup probe: True at ``successThreshold`` successes, False at ``failureThreshold``."""
    async with contextlib.aclosing(_verdicts(runner, probe, "Startup")) as verdicts:
        async for ok in verdicts:
            return ok
    return False  # not reached: the verdicts never end


async def probe_loop(
    runner: ContainerRunner,
    probe: Mapping[str, Any],
    kind: str,
    on_result: Callable[[bool], None],
) -> None:
    """Run ``probe`` for as long as the container runs; report each threshold crossing."""
    async with contextlib.aclosing(_verdicts(runner, probe, kind)) as verdicts:
        async for ok in verdicts:
            on_result(ok)


async def _verdicts(
    runner: ContainerRunner, probe: Mapping[str, Any], kind: str
) -> AsyncGenerator[bool]:
    """Probe every period; True once ``successThreshold`` successes in a row are reached (and
    at each success after), False at ``failureThreshold`` failures in a row (and each after);
    every failure is an ``Unhealthy`` event."""
    timing = Timing.of(probe)
    await asyncio.sleep(timing.initial_delay_s)
    failures = successes = 0
    while True:
        ok, message = await check(probe, runner.spec, runner.launch.ports, runner.launch.env)
        if ok:
            successes, failures = successes + 1, 0
            if successes >= timing.success_threshold:
                yield True
        else:
            successes, failures = 0, failures + 1
            runner.emit("Warning", "Unhealthy", f"{kind} probe failed: {message}")
            if failures >= timing.failure_threshold:
                yield False
        await asyncio.sleep(timing.period_s)
