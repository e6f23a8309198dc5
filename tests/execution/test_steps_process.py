"""A step's process group is gone by the time the step is reported — timed out, finished or
interrupted — not only after the run, when the final sweep of the pid files would hide a
step that stopped its shell and left the shell's children running.

Each step's shell starts ``sleep 300`` in the background and writes its pid; the observer
looks at that process at the moment the runner reports the step, while the run would still
go on. Leftover groups of an earlier attempt are ended only when their pid file names that
very process (same start time): a reused pid is somebody else's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubefacts.process_group import start_time
from testbed.config.templating import PlannedStep
from testbed.core.processes import ServerProcess, kill_leftover
from testbed.execution.events import Silent
from testbed.execution.steps import runner as runner_module
from testbed.execution.steps.runner import StepRunner
from testbed.results.steps import STEP_FILE, steps_dir

BACKGROUND = 'sleep 300 & echo $! > "$ARTIFACT_DIR/child"'


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


class Reports(Silent):
    """Each step's report, and whether its background child was alive when it was made."""

    def __init__(self, run: Path) -> None:
        self.run = run
        self.seen: list[tuple[str, str, bool]] = []  # (detail, step.json status, child alive)
        self.children: list[int] = []

    def phase(self, name: str, detail: str = "") -> None:
        step, _, what = detail.partition(": ")
        child_file = steps_dir(self.run) / step / "child"
        if what == "started" or not child_file.is_file():
            return
        child = int(child_file.read_text())
        self.children.append(child)
        status = json.loads((steps_dir(self.run) / step / STEP_FILE).read_text())["status"]
        self.seen.append((what, status, _alive(child)))


@contextlib.contextmanager
def runner(tmp_path: Path) -> Iterator[tuple[StepRunner, Reports]]:
    reports = Reports(tmp_path)
    try:
        yield StepRunner(tmp_path, tmp_path, reports), reports
    finally:  # a product that leaves the child running must not leave it to the machine
        for child in reports.children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)


def _step(script: str, timeout_s: float | None = None, number: int = 1) -> PlannedStep:
    return PlannedStep(
        number, "prepare", "prepare", number, f"s{number}", "run", ("sh", "-c", script),
        timeout_s=timeout_s,
    )  # fmt: skip


def test_a_timed_out_steps_children_are_gone_when_it_is_reported(tmp_path: Path) -> None:
    with runner(tmp_path) as (steps, reports):
        ok = asyncio.run(steps.run_stage([_step(f"{BACKGROUND}; wait", timeout_s=0.5)], "prepare"))
    assert not ok
    [(what, status, alive)] = reports.seen
    assert status == "timed out"
    assert what == "timed out after 0.5 s (process group stopped)"
    assert not alive, "the step was reported stopped while its child still ran"
    assert not list((tmp_path / "pids").glob("step-*.json"))  # nothing left to sweep


def test_what_a_finished_step_left_running_is_gone_when_it_is_reported(tmp_path: Path) -> None:
    with runner(tmp_path) as (steps, reports):
        first, second = _step(BACKGROUND), _step(f"{BACKGROUND}; exit 4", number=2)
        asyncio.run(steps.run_stage([first], "prepare"))
        asyncio.run(steps.run_stage([second], "prepare"))
    assert [(status, alive) for _, status, alive in reports.seen] == [
        ("ok", False),
        ("failed", False),
    ]


def test_an_interrupted_steps_children_are_gone_when_the_cancel_returns(tmp_path: Path) -> None:
    child_file = steps_dir(tmp_path) / "001__prepare__s1" / "child"

    ready = tmp_path / "ready"
    os.mkfifo(ready)  # the step says when its child runs: no polling

    async def interrupt(steps: StepRunner) -> None:
        script = f'{BACKGROUND}; echo up > "{ready}"; wait'
        task = asyncio.ensure_future(steps.run_stage([_step(script)], "prepare"))
        async with asyncio.timeout(60):
            assert await asyncio.to_thread(ready.read_text) == "up\n"
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    with runner(tmp_path) as (steps, reports):
        asyncio.run(interrupt(steps))
        child = int(child_file.read_text())
        reports.children.append(child)
        assert not _alive(child)
    record = json.loads((child_file.parent / STEP_FILE).read_text())
    assert record["status"] == "interrupted"


def test_a_leftover_is_ended_only_when_its_pid_file_names_that_very_process(
    tmp_path: Path,
) -> None:
    process = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        pid_file = tmp_path / "step-001.json"
        pid_file.write_text(json.dumps({"pid": process.pid, "start": "1"}))  # a reused pid
        assert kill_leftover(pid_file) is None
        assert process.poll() is None
        assert not pid_file.exists()
        pid_file.write_text(json.dumps({"pid": process.pid, "start": start_time(process.pid)}))
        assert kill_leftover(pid_file) == (
            f"ended leftover server process group {process.pid} (step-001.json)"
        )
        assert process.wait(10) == -signal.SIGKILL
    finally:
        process.kill()
        process.wait()


def test_a_step_interrupted_while_its_child_starts_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C lands while the child is being started (the window is a few ms in a run; here
    it is held open): the child already runs, so its whole group must still go."""
    spawned, release = asyncio.Event(), asyncio.Event()
    real_start = runner_module._start

    async def slow_start(*args: Any) -> ServerProcess:
        child = await real_start(*args)
        spawned.set()
        await release.wait()  # Ctrl-C comes now, before the start returns
        return child

    monkeypatch.setattr(runner_module, "_start", slow_start)
    child_file = steps_dir(tmp_path) / "001__prepare__s1" / "child"
    ready = tmp_path / "ready"
    os.mkfifo(ready)

    async def interrupt(steps: StepRunner) -> None:
        script = f'{BACKGROUND}; echo up > "{ready}"; wait'
        task = asyncio.ensure_future(steps.run_stage([_step(script)], "prepare"))
        async with asyncio.timeout(60):
            await spawned.wait()
            assert await asyncio.to_thread(ready.read_text) == "up\n"
        task.cancel()
        await asyncio.sleep(0)  # the cancel reaches the step
        release.set()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    with runner(tmp_path) as (steps, reports):
        asyncio.run(interrupt(steps))
        child = int(child_file.read_text())
        reports.children.append(child)
        assert not _alive(child)
