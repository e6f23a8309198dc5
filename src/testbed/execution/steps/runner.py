"""Running the steps of one stage: blocks in order, the steps of a ``parallel:`` block at
once (joined before the next block), each child in its own process group.

A child gets ``ARTIFACT_DIR`` (its step folder), ``TESTBED_RUN_ID``, ``TESTBED_RUN_DIR``,
``TESTBED_PHASE``, ``TESTBED_STEP`` and what the backend adds (``KUBECONFIG``,
``NAMESPACE`` on a cluster); it runs in the campaign's folder with stdin closed, stdout and
stderr into ``stdout.log`` and ``stderr.log``. A timeout, Ctrl-C or SIGTERM stops its whole
group the local backend's way (interrupt → wait → terminate → wait → kill). A failing step
without ``on_error: continue`` ends the stage: the steps after it do not start.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import shutil
import signal
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubefacts.process_group import die_with_parent, start_time
from testbed.config.templating import PlannedStep
from testbed.core.clock import monotonic_ns, wall_label
from testbed.core.errors import TestbedError
from testbed.core.processes import ServerProcess, stop
from testbed.core.secrets import mask, redact, resolve, values
from testbed.execution.events import Observer
from testbed.results.files import write_json
from testbed.results.rundir import PID_DIR
from testbed.results.steps import (
    OK,
    STDERR,
    STDOUT,
    STEP_FILE,
    STEPS_PLAN,
    blocking,
    read_step,
    steps_dir,
)

TAIL_LINES = 20
#: Seconds a stopped step gets after SIGINT, then after SIGTERM, before SIGKILL.
STOP_GRACE_S = 3.0

#: Dumps the run's state into a folder; returns notes (what was captured, what was not).
StateCapture = Callable[[Path], Awaitable[list[str]]]


def _die_with_parent() -> None:  # runs in the child between fork and exec
    die_with_parent(signal.SIGTERM)


@dataclass
class StepRunner:
    """Runs planned steps of one run; remembers the first blocking failure."""

    run_path: Path
    base_dir: Path  # the campaign's folder: the children's working directory
    observer: Observer
    env: Mapping[str, str] = field(default_factory=dict)  # added to every child's environment
    capture: StateCapture | None = None
    resume: bool = False  # skip the steps whose folder says ok
    # Texts holding the campaign's ${env:} references: a child inherits the whole
    # environment, so any of their values may come back in its output, not only its argv's.
    references: tuple[str, ...] = ()
    failure: str = ""  # the first blocking failure: "<dir>: <why>"

    def write_plan(self, steps: list[PlannedStep], skipped_phases: set[str]) -> None:
        """``steps/plan.json``: every step, so the report lists those that never ran too."""
        write_json(
            steps_dir(self.run_path) / STEPS_PLAN,
            {
                "skipped_phases": sorted(skipped_phases),
                "steps": [s.to_json() for s in steps],
            },
        )

    async def run_stage(self, steps: list[PlannedStep], stage: str) -> bool:
        """Run the steps of ``stage``; False when one failed blockingly (later ones not run)."""
        mine = [s for s in steps if s.stage == stage]
        for _, block in itertools.groupby(mine, key=lambda s: s.block):
            group = list(block)
            results = await asyncio.gather(*(self._one(s) for s in group))
            if not all(results):
                return False
        return True

    async def _one(self, step: PlannedStep) -> bool:
        folder = steps_dir(self.run_path) / step.dirname
        if self.resume and read_step(folder).get("status") == OK:
            self.observer.phase(step.phase, f"{step.dirname}: done in an earlier attempt")
            return True
        _keep_earlier(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.observer.phase(step.phase, f"{step.dirname}: started")
        record = {**step.to_json(), "started": wall_label(), "status": "running"}
        await asyncio.to_thread(write_json, folder / STEP_FILE, record)  # off the loop
        began = monotonic_ns()
        try:
            if step.kind == "capture":
                outcome = await self._capture(folder)
            else:
                outcome = await self._process(step, folder)
        except asyncio.CancelledError:
            tail = _tail(folder, self._secrets(step))
            record.update(status="interrupted", duration_s=_since(began), tail=tail)
            write_json(folder / STEP_FILE, record)
            raise
        record.update(outcome, duration_s=_since(began))
        if record["status"] != OK:
            record["tail"] = _tail(folder, self._secrets(step))
        await asyncio.to_thread(write_json, folder / STEP_FILE, record)
        return self._verdict(step, record)

    def _verdict(self, step: PlannedStep, record: dict[str, Any]) -> bool:
        status = record["status"]
        detail = f"exit {record.get('exit_code')}" if status == "failed" else status
        if status == OK:
            self.observer.phase(step.phase, f"{step.dirname}: ok ({record['duration_s']} s)")
            return True
        why = record.get("message") or detail
        tail = "\n".join(record.get("tail") or [])
        if not blocking(record):
            self.observer.phase(step.phase, f"{step.dirname}: {why} (on_error: continue)")
            return True
        self.observer.phase(step.phase, f"{step.dirname}: {why}\n{tail}".rstrip())
        if not self.failure:
            self.failure = f"step {step.dirname} {why}" + (f":\n{tail}" if tail else "")
        return False

    def _secrets(self, step: PlannedStep) -> list[str]:
        """The values a step's output must not show (its argv's and the campaign's)."""
        return values([*self.references, *step.argv])

    async def _capture(self, folder: Path) -> dict[str, Any]:
        if self.capture is None:
            return {"status": "failed", "message": "this backend has no state to capture"}
        try:
            notes = await self.capture(folder)
        except TestbedError as exc:
            return {"status": "failed", "message": f"capture failed: {redact(str(exc))}"}
        return {"status": OK, "notes": notes}

    async def _process(self, step: PlannedStep, folder: Path) -> dict[str, Any]:
        try:
            argv = [resolve(part) for part in step.argv]
        except TestbedError as exc:
            return {"status": "failed", "message": str(exc)}
        env = {
            **os.environ,
            **self.env,
            "ARTIFACT_DIR": str(folder.resolve()),
            "TESTBED_PHASE": step.phase,
            "TESTBED_STEP": step.name,
        }
        pid_file = self.run_path / PID_DIR / f"step-{step.number:03d}.json"
        started = asyncio.ensure_future(_start(argv, env, folder, self.base_dir, pid_file))
        try:
            child = await asyncio.shield(started)
        except OSError as exc:
            return {"status": "failed", "message": f"cannot start {step.shown()[0]}: {exc}"}
        except asyncio.CancelledError:
            # Ctrl-C while the child was starting: it may run already (asyncio would kill only
            # the shell, not what it spawned); its whole group goes, as after the start
            await asyncio.shield(_stop_when_started(started))
            raise
        try:
            async with asyncio.timeout(step.timeout_s):
                code = await child.process.wait()
        except TimeoutError:
            await stop(child, STOP_GRACE_S)
            return {
                "status": "timed out",
                "exit_code": child.process.returncode,
                "message": f"timed out after {step.timeout_s} s (process group stopped)",
            }
        except asyncio.CancelledError:
            await asyncio.shield(stop(child, STOP_GRACE_S))
            raise
        await stop(child, STOP_GRACE_S)  # what it left running in its group goes too
        return {"status": OK if code == 0 else "failed", "exit_code": code}


async def _start(
    argv: list[str], env: Mapping[str, str], folder: Path, cwd: Path, pid_file: Path
) -> ServerProcess:
    with (folder / STDOUT).open("ab") as out, (folder / STDERR).open("ab") as err:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    # as the local backend writes its servers' (a lost pid file only costs the sure-kill)
    pid_file.write_text(json.dumps({"pid": process.pid, "start": start_time(process.pid)}))
    return ServerProcess(process, folder / STDOUT, pid_file)


async def _stop_when_started(started: asyncio.Future[ServerProcess]) -> None:
    with contextlib.suppress(OSError):
        await stop(await started, STOP_GRACE_S)


def _keep_earlier(folder: Path) -> None:
    """An earlier attempt's files move to ``attempts/<n>/``: nothing recorded is lost."""
    if not folder.is_dir():
        return
    leftovers = [p for p in folder.iterdir() if p.name != "attempts"]
    if not leftovers:
        return
    attempts = folder / "attempts"
    n = len(list(attempts.iterdir())) + 1 if attempts.is_dir() else 1
    keep = attempts / str(n)
    keep.mkdir(parents=True)
    for item in leftovers:
        shutil.move(str(item), keep / item.name)


def _tail(folder: Path, secrets: list[str]) -> list[str]:
    """The last lines of stderr, else of stdout; a secret the step could read, echoed back,
    is shown as *** however short (the report, step.json and summary.json carry the tail;
    the logs are the child's)."""
    for name in (STDERR, STDOUT):
        try:
            text = (folder / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if text.strip():
            lines = text.splitlines()[-TAIL_LINES:]
            return [mask(line, secrets) for line in lines]
    return []


def _since(began: int) -> float:
    return round((monotonic_ns() - began) / 1e9, 3)
