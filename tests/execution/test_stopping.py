"""Stop requests and the final cleanup (issue 32): what the run made is removed even when a
stop request comes during the final cleanup; only a second one cuts the removal short, and
then the run says exactly what is left and how to remove it.

The backend is scripted (its final removal does what each test says) and the stop requests
are real signals to this process, sent at the moment the test names: by a final cleanup
step, by the probe, by the removal itself — never after a delay.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from testbed.backends.base import Backend, Handle
from testbed.clients.endpoint import Endpoint
from testbed.config.deployments import AnyDeployment
from testbed.config.loader import load_campaign_text
from testbed.core.errors import Interrupted
from testbed.execution import pipeline
from testbed.execution.events import Silent
from testbed.execution.pipeline import RunOutcome, execute, open_new
from testbed.execution.run import RunOptions
from testbed.probes import load as load_probe
from testbed.probes.base import ProbeContext, ProbeOutcome
from testbed.results.verdict import Status, Verdict

CAMPAIGN = "name: stops\ndeployments:\n  - {name: a, server: sim}\nload: {requests: 1}\n"
#: A final cleanup step that asks testbed (its parent) to stop, then waits to be stopped.
STOPPING_STEP = (
    "steps:\n  final_cleanup:\n"
    '    - {name: stop-me, run: [sh, -c, "kill -INT $PPID; exec sleep 600"]}\n'
)


class Scripted(Backend):
    """Serves at once; its final removal runs ``removal`` (the first cleanup, before the
    run, removes nothing)."""

    name = "scripted"

    def __init__(self, removal: Callable[[], Awaitable[None]]) -> None:
        self.removal = removal
        self.cleanups = 0
        self.removed = False

    async def cleanup_leftovers(self, run_dir: Path) -> list[str]:
        self.cleanups += 1
        if self.cleanups > 1:
            await self.removal()
            self.removed = True
        return []

    def remains(self, run_dir: Path) -> list[str]:
        return ["namespace scripted-ns (the run's, with everything in it)"]

    @contextlib.asynccontextmanager
    async def provision(
        self, worker_id: str, deployment: AnyDeployment, work_dir: Path
    ) -> AsyncIterator[Handle]:
        yield Handle(Endpoint(base_url="http://127.0.0.1:9", model="m"))


class Said(Silent):
    """Keeps the phase lines; ``noted`` is set when the run says it finishes the removal."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.noted = asyncio.Event()

    def phase(self, name: str, detail: str = "") -> None:
        self.lines.append(f"{name}: {detail}")
        if "again cuts it short" in detail:
            self.noted.set()


def stop_me() -> None:
    os.kill(os.getpid(), signal.SIGINT)


def run(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    backend: Scripted,
    said: Said,
    *,
    steps: str = "",
    probe_stops: bool = False,
) -> RunOutcome:
    async def probe(ctx: ProbeContext) -> ProbeOutcome:
        if probe_stops:
            stop_me()
            await asyncio.Event().wait()  # until the run is stopped
        return ProbeOutcome({}, Verdict(status=Status.PASS, reason="scripted"))

    monkeypatch.setattr(load_probe, "run", probe)
    monkeypatch.setattr(pipeline, "make_backend", lambda loaded, run_dir: backend)
    loaded = load_campaign_text(CAMPAIGN + steps, str(tmp_path / "c.yaml"))
    run_dir, plan = open_new(loaded, RunOptions(out=tmp_path / "run"))
    return asyncio.run(execute(loaded, run_dir, plan, RunOptions(observer=said)))


def test_a_stop_during_the_final_cleanup_steps_still_removes_what_the_run_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def removal() -> None:
        pass

    backend = Scripted(removal)
    with pytest.raises(Interrupted) as stopped:
        run(tmp_path, monkeypatch, backend, Said(), steps=STOPPING_STEP)
    assert backend.removed  # the steps were stopped, the removal was not skipped
    assert "SIGINT: stopped" in str(stopped.value)
    assert f"testbed run --resume {tmp_path / 'run'}" in str(stopped.value)


def test_a_stop_during_the_removal_is_noted_and_the_removal_finishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    said = Said()

    async def removal() -> None:
        stop_me()
        await said.noted.wait()  # the request came, and was only noted

    backend = Scripted(removal)
    outcome = run(tmp_path, monkeypatch, backend, said)
    assert backend.removed
    assert outcome.cleanup_error is None
    assert [v.status for v in outcome.verdicts.values()] == [Status.PASS]


def test_a_second_stop_cuts_the_removal_short_and_says_what_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def removal() -> None:
        stop_me()  # the second request: the first stopped the probe
        await asyncio.Event().wait()  # until it is cut short

    backend = Scripted(removal)
    with pytest.raises(Interrupted) as stopped:
        run(tmp_path, monkeypatch, backend, Said(), probe_stops=True)
    assert not backend.removed
    message = str(stopped.value)
    assert message.startswith("SIGINT again: the final cleanup was cut short — left: ")
    assert "namespace scripted-ns (the run's, with everything in it)" in message
    assert f"`testbed cleanup {tmp_path / 'run'}`" in message


def test_a_second_stop_during_the_final_steps_names_them_among_what_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def removal() -> None:
        pass

    backend = Scripted(removal)
    with pytest.raises(Interrupted) as stopped:
        run(tmp_path, monkeypatch, backend, Said(), steps=STOPPING_STEP, probe_stops=True)
    assert not backend.removed
    assert "left: the final cleanup steps; namespace scripted-ns" in str(stopped.value)
