"""Child processes of this machine (the local backend's servers, the user's steps): started
in their own process group, stopped politely then surely.

Each server runs in a new session (its own process group) so that a shutdown reaches the
processes it spawned too (vLLM starts engine processes). On Linux the child also asks the
kernel to send it SIGTERM should testbed die without cleaning up (PR_SET_PDEATHSIG), and a
pid file in the run directory lets the next ``--resume`` or ``testbed cleanup`` end the
group if even that failed.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kubefacts.process_group import (
    die_with_parent,
    group_alive,
    signal_group,
    start_time,
    wait_group,
)


def _die_with_parent() -> None:  # runs in the child between fork and exec
    die_with_parent(signal.SIGTERM)  # SIGTERM: a server may still flush its log


@dataclass
class ServerProcess:
    """A started server and where its output goes."""

    process: asyncio.subprocess.Process
    log_path: Path
    pid_file: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of the server's output."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


async def start(
    argv: Sequence[str], env: Mapping[str, str], log_path: Path, pid_file: Path
) -> ServerProcess:
    """Start ``argv`` in a new process group, output appended to ``log_path``."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=log,
            stderr=asyncio.subprocess.STDOUT,
            env=dict(env),
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    pid_file.write_text(json.dumps({"pid": process.pid, "start": start_time(process.pid)}))
    return ServerProcess(process, log_path, pid_file)


async def stop(server: ServerProcess, grace_s: float = 5.0) -> int | None:
    """Interrupt → wait → terminate → wait → kill the whole group; return the exit code."""
    process = server.process
    for sig, wait_s in ((signal.SIGINT, grace_s), (signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        if process.returncode is not None and not group_alive(process.pid):
            break
        signal_group(process.pid, sig)
        await wait_group(process, wait_s)
    server.pid_file.unlink(missing_ok=True)
    return process.returncode


def kill_leftover(pid_file: Path) -> str | None:
    """End the process group recorded in ``pid_file`` if that very process still runs."""
    try:
        recorded = json.loads(pid_file.read_text())
        pid, started = int(recorded["pid"]), recorded.get("start")
    except (OSError, ValueError, KeyError):
        pid_file.unlink(missing_ok=True)
        return None
    message = None
    if group_alive(pid) and (started is None or start_time(pid) in (started, None)):
        signal_group(pid, signal.SIGKILL)
        message = f"ended leftover server process group {pid} ({pid_file.name})"
    pid_file.unlink(missing_ok=True)
    return message


def kill_leftovers(pid_dir: Path) -> list[str]:
    """End every process group recorded in ``pid_dir`` that still runs; say which."""
    found = (kill_leftover(pid_file) for pid_file in sorted(pid_dir.glob("*.json")))
    return [message for message in found if message]


def running_groups(pid_dir: Path) -> list[int]:
    """The process groups recorded in ``pid_dir`` whose very process still runs (what a
    cleanup cut short may have left: servers, steps)."""
    found = []
    for pid_file in sorted(pid_dir.glob("*.json")):
        try:
            recorded = json.loads(pid_file.read_text())
            pid, started = int(recorded["pid"]), recorded.get("start")
        except (OSError, ValueError, KeyError):
            continue
        if group_alive(pid) and (started is None or start_time(pid) in (started, None)):
            found.append(pid)
    return found
