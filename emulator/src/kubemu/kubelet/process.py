"""One container run as a host process: its own process group, output into its run log.

The container runs under the shim (``kubelet.shim``), which leads a new session (one signal
reaches everything the container spawned) and kills that whole group if the emulator dies
first, so no container process outlives the emulator even on SIGKILL. Stopping follows the
kubelet: SIGTERM to the group, the grace period, then SIGKILL. Exit statuses are reported
the way container runtimes do: a death by signal N is exit code 128 + N.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubefacts.process_group import die_with_parent, group_alive, signal_group, wait_group
from kubemu.kubelet.logs import RunLog

SHIM = Path(__file__).with_name("shim.py")
#: Longest output line kept whole (a container's JSON lines can be long).
MAX_LINE = 4 * 1024 * 1024


@dataclass
class HostProcess:
    """A started container process and the task copying its output to the run log."""

    process: asyncio.subprocess.Process
    log: RunLog
    pump: asyncio.Task[None]
    #: Set when the emulator killed it for a reason of its own (OOM, liveness, deletion).
    killed_for: str | None = field(default=None)

    @property
    def pid(self) -> int:
        return self.process.pid

    async def wait(self) -> int:
        """The exit code, as a container runtime reports it (128 + N for signal N)."""
        code = await self.process.wait()
        with contextlib.suppress(asyncio.CancelledError):
            await self.pump
        return exit_code(code)


async def spawn(
    argv: Sequence[str], env: Mapping[str, str], cwd: Path | None, log: RunLog
) -> HostProcess:
    """Start ``argv`` in a new process group; stdout and stderr go to ``log`` line by line.

    OSError when ``argv[0]`` is not an executable on the container's ``PATH``.
    """
    if not on_path(argv[0], env):
        raise FileNotFoundError(f'exec: "{argv[0]}": executable file not found in $PATH')
    process = await under_shim(
        argv,
        env,
        cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,  # two streams, each read by whole lines, as CRI does
        limit=MAX_LINE,
    )
    pump = asyncio.create_task(_pumps(process, log), name=f"log-{process.pid}")
    return HostProcess(process, log, pump)


def on_path(program: str, env: Mapping[str, str]) -> bool:
    """Whether ``program`` is an executable on the container's ``PATH``."""
    return shutil.which(program, path=env.get("PATH", os.defpath)) is not None


async def under_shim(
    argv: Sequence[str], env: Mapping[str, str], cwd: Path | None, **how: Any
) -> asyncio.subprocess.Process:
    """``argv`` under the shim, leading a session of its own; ``how`` gives its stdio (and
    a ``preexec_fn`` other than dying with the emulator, which it must then do itself)."""
    how.setdefault("preexec_fn", die_with_parent)
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-I",
        str(SHIM),
        *argv,
        env=dict(env),
        cwd=str(cwd) if cwd else None,
        start_new_session=True,
        **how,
    )


def exit_code(returncode: int) -> int:
    """A process's exit as container runtimes report it: a death by signal N is 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


async def _pumps(process: asyncio.subprocess.Process, log: RunLog) -> None:
    assert process.stdout is not None
    assert process.stderr is not None
    await asyncio.gather(_pump(process.stdout, log, "stdout"), _pump(process.stderr, log, "stderr"))


async def _pump(reader: asyncio.StreamReader, log: RunLog, stream: str) -> None:
    while True:
        try:
            line = await reader.readline()
        except ValueError:  # a line longer than MAX_LINE: its first MAX_LINE bytes, as a line
            line = await reader.read(MAX_LINE)
        if not line:
            return
        log.write(line.decode("utf-8", errors="replace").rstrip("\n"), stream)


async def stop(proc: HostProcess, grace_s: float) -> int:
    """SIGTERM the group, wait up to ``grace_s``, then SIGKILL it; the exit code."""
    pgid = proc.pid
    if proc.process.returncode is None or group_alive(pgid):
        signal_group(pgid, signal.SIGTERM)
        if not await wait_group(proc.process, grace_s):
            signal_group(pgid, signal.SIGKILL)
            await wait_group(proc.process, 10.0)
    return await proc.wait()


def kill_now(proc: HostProcess, reason: str) -> None:
    """SIGKILL the whole group at once (OOM, shutdown); ``reason`` is remembered."""
    proc.killed_for = proc.killed_for or reason
    signal_group(proc.pid, signal.SIGKILL)
