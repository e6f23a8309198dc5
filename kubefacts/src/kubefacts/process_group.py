"""Process-group primitives: children that die with their parent and stop as a whole group.

A child started with ``start_new_session=True`` and :func:`die_with_parent` as its
``preexec_fn`` leads its own process group (so one signal reaches everything it spawned)
and gets SIGKILL from the kernel should its parent die without cleaning up
(``PR_SET_PDEATHSIG``). The emulator's process-kubelet and the local backend's server
processes use these; :func:`run_foreground` runs one such child in the foreground of a
command (``testbed serve vllm``), passing the signals that stop the command on to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter_ns as monotonic_ns

_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """Ask the kernel to send ``sig`` to this process when its parent dies (Linux only).

    Meant for ``preexec_fn``: it runs in the child between fork and exec.
    """
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, sig)


def signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to process group ``pgid``; False when the group is gone."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def signal_child(process: asyncio.subprocess.Process, sig: int) -> None:
    """Send ``sig`` to an asyncio child that has not exited, without reaping it.

    Not ``process.kill()``/``terminate()``/``send_signal()``: on Python 3.11 they poll the
    child first (``waitpid(WNOHANG)``, bpo-38630), and a child that has just died is then
    reaped by the loop's thread before asyncio's child watcher thread gets to it; the
    watcher finds nothing to wait for and asyncio reports exit status 255 instead of the
    signal ("Unknown child process pid", CPython issue #87744) — on a loaded machine, where
    the watcher runs late. Until asyncio has reported the exit the pid is still this child's
    (a zombie keeps its pid), so signalling it by pid is safe.
    """
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, sig)


def group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` still exists (zombies included)."""
    return signal_group(pgid, 0)


async def wait_group(process: asyncio.subprocess.Process, timeout_s: float) -> bool:
    """Wait up to ``timeout_s`` for the group ``process`` leads to be gone: the leader's exit
    reported, then every other member gone; whether it is."""
    deadline = monotonic_ns() + int(timeout_s * 1e9)
    while monotonic_ns() < deadline:
        if process.returncode is None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.05):
                    await asyncio.shield(process.wait())
            continue
        if not group_alive(process.pid):
            return True
        await asyncio.sleep(0.02)  # the leader is gone; its children are on their way
    return process.returncode is not None and not group_alive(process.pid)


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot: tells a reused pid apart."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[19]


def group_members(pgid: int) -> Iterator[tuple[Path, list[str]]]:
    """Each live process of group ``pgid``: its ``/proc/<pid>`` folder and the fields of its
    ``stat`` after the command name (``[0]`` state, ``[1]`` ppid, ``[2]`` pgrp, ``[19]``
    start time); processes that vanish while being read are passed over."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid:
                continue
        except (OSError, IndexError, ValueError):
            continue
        yield Path(entry.path), fields


def group_rss_bytes(pgid: int) -> int:
    """Resident memory of every live process in group ``pgid`` (0 when none is readable)."""
    total = 0
    page = os.sysconf("SC_PAGE_SIZE")
    for proc, _ in group_members(pgid):
        try:
            total += int((proc / "statm").read_text().split()[1]) * page
        except (OSError, IndexError, ValueError):
            continue
    return total


#: Signals a foreground command passes on to its child's group (a terminal's Ctrl-C, what
#: systemd, a container runtime or a CI runner sends to stop it, a closed terminal).
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass
class Foreground:
    """How a foreground child ended: its exit code, and the signal that asked it to stop
    (None: it ended by itself); ``killed`` when the group had to be killed."""

    code: int
    stopped_by: int | None = None
    killed: bool = False


def run_foreground(
    argv: Sequence[str],
    env: Mapping[str, str],
    on_output: Callable[[bytes], None],
    grace_s: float = 30.0,
) -> Foreground:
    """Run ``argv`` in the foreground until it ends, its output (stdout and stderr, line by
    line) handed to ``on_output``; call from the main thread.

    The child leads a process group of its own (it may start others: vLLM's engine), dies
    with this process, and every signal of :data:`FORWARDED` sent here is passed on to the
    whole group — without that, SIGTERM ends this process and leaves the server running.
    A second signal, or ``grace_s`` without the child gone, kills the group; whatever of the
    group outlives its leader is killed too. Nothing is left when this returns.
    """
    import subprocess

    received: list[int] = []
    state = Foreground(0)
    process: subprocess.Popen[bytes] | None = None

    def kill() -> None:
        if process is not None and signal_group(process.pid, signal.SIGKILL):
            state.killed = True

    timer = threading.Timer(grace_s, kill)
    timer.daemon = True

    def forward(signum: int, _frame: object) -> None:
        received.append(signum)
        if process is None:
            return  # passed on once the child exists
        if len(received) == 1:
            signal_group(process.pid, signum)
            timer.start()
        else:
            kill()

    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED}
    try:
        process = subprocess.Popen(
            list(argv),
            env=dict(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            # a foreground command starts no thread before (the grace timer comes after)
            preexec_fn=_die_with_parent_term,  # noqa: PLW1509
        )
        if received:  # a signal came while it was being started
            forward(received.pop(), None)
        with process:
            assert process.stdout is not None
            for raw in process.stdout:
                on_output(raw)
            state.code = process.wait()
    finally:
        timer.cancel()
        if process is not None and group_alive(process.pid):
            kill()  # a member that outlived the leader (its pipe closed or not)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    state.stopped_by = received[0] if received else None
    return state


def _die_with_parent_term() -> None:  # runs in the child between fork and exec
    die_with_parent(signal.SIGTERM)  # SIGTERM: the server may still shut down cleanly
