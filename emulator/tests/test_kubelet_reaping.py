"""The emulator's children are reaped by asyncio's child watcher alone, whatever the load.

On Python 3.11 asyncio waits for each child in a thread of its own (``ThreadedChildWatcher``:
a blocking ``os.waitpid(pid, 0)``). Anyone else reaping the child first — such as
``Process.kill()``, whose ``Popen.send_signal`` polls the child with ``waitpid(WNOHANG)``
before signalling (bpo-38630) — leaves that thread with ``ChildProcessError``, and asyncio
reports exit status 255 ("Unknown child process pid …") instead of the signal: a command
killed with its pod said 255, not 137 (CPython issue #87744). The race is lost only when the
watcher's thread runs late, as on a loaded machine, so these tests make it late on purpose:
its wait for a held child waits until the child is a zombie and the test lets it go.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kubefacts.process_group import signal_child, signal_group
from kubemu.kubelet.process import exit_code, under_shim
from kubemu.testing import running_plane, wait_for
from test_kubelet_exec import exec_stream, running

pytestmark = [pytest.mark.kubernetes]


def zombie_or_gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


class LateWatcher:
    """Holds asyncio's child watcher back from reaping the held pids until :meth:`release`
    (as a loaded machine leaves the watcher's thread unscheduled while the loop goes on)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.held: set[int] = set()
        self.all = False
        self.released = threading.Event()
        real_waitpid = os.waitpid

        def waitpid(pid: int, options: int) -> tuple[int, int]:
            if options == 0:  # the watcher's blocking wait (subprocess binds its own waitpid)
                while not zombie_or_gone(pid) and not self.released.is_set():
                    time.sleep(0.01)
                if self.all or pid in self.held:
                    self.released.wait(30)
            return real_waitpid(pid, options)

        monkeypatch.setattr(os, "waitpid", waitpid)

    def release(self) -> None:
        self.released.set()


@pytest.fixture
def late_watcher(monkeypatch: pytest.MonkeyPatch) -> Iterator[LateWatcher]:
    late = LateWatcher(monkeypatch)
    yield late
    late.release()


def _kill_group(process: asyncio.subprocess.Process) -> None:
    signal_group(process.pid, signal.SIGKILL)  # the exec's teardown, a pod's stop


def _kill_child(process: asyncio.subprocess.Process) -> None:
    signal_child(process, signal.SIGKILL)  # an exec probe's, a load child's


@pytest.mark.parametrize("kill", [_kill_group, _kill_child], ids=["group", "child"])
def test_a_child_killed_after_it_died_reports_its_signal_when_the_watcher_runs_late(
    late_watcher: LateWatcher, kill: Callable[[asyncio.subprocess.Process], None]
) -> None:
    late_watcher.all = True

    async def scenario() -> int:
        process = await under_shim(["sleep", "600"], {"PATH": os.defpath}, None)
        os.killpg(process.pid, signal.SIGKILL)  # it died (its pod went) before the teardown
        wait_for("the child to be a zombie", lambda: zombie_or_gone(process.pid))
        kill(process)  # the emulator's teardown, before the watcher has reaped it
        await asyncio.sleep(0.05)
        late_watcher.release()
        async with asyncio.timeout(10):
            return exit_code(await process.wait())

    assert asyncio.run(scenario()) == 137


def test_an_exec_whose_command_died_before_its_pod_went_reports_137(
    tmp_path: Path, late_watcher: LateWatcher
) -> None:
    """The exec's own teardown: its command died just as the pod was deleted, and asyncio's
    watcher has not collected it when the exec stops; it ends 137, as a real kubelet says."""
    with running_plane(tmp_path) as h:
        running(h, "box")
        resp = exec_stream(h, ["sh", "-c", "echo $$; exec sleep 600"])
        pid = int(wait_for("the command's pid", lambda: resp.update(1) or resp.read_stdout()))
        shim = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        late_watcher.held.add(shim)
        os.killpg(shim, signal.SIGKILL)
        wait_for("the shim to be a zombie", lambda: zombie_or_gone(shim))
        h.core.delete_namespaced_pod("box", "default")

        def pod_gone_or_shim_reaped() -> bool:
            # Reaped while the watcher is held: by someone else, the fault this test catches.
            pods = h.core.list_namespaced_pod("default").items
            return not Path(f"/proc/{shim}").exists() or all(p.metadata.name != "box" for p in pods)

        wait_for("the pod to go (or the shim to be reaped)", pod_gone_or_shim_reaped)
        time.sleep(0.5)  # the exec's teardown follows the pod's stop at once
        late_watcher.release()
        resp.run_forever(timeout=20)
        resp.sock.shutdown()
        assert resp.returncode == 137
