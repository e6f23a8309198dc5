"""The ``execution:`` fields (and the campaign's ``description``) change what a run does:
each test here fails if its field is ignored. A scripted backend records what the pipeline
asks of it; the load probe is replaced by one that reports a chosen verdict."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from testbed.backends.base import Backend, Handle
from testbed.clients.endpoint import Endpoint
from testbed.config.deployments import AnyDeployment
from testbed.config.loader import load_campaign_text
from testbed.core.errors import ServerStartError
from testbed.execution import pipeline
from testbed.execution.pipeline import execute, open_new
from testbed.execution.run import RunOptions
from testbed.probes import load as load_probe
from testbed.probes.base import ProbeContext, ProbeOutcome
from testbed.results.verdict import Status, Verdict

HEAD = """\
name: fields
description: nightly regression of the sim fleet
deployments:
  - {name: a, server: sim}
  - {name: b, server: sim}
  - {name: c, server: sim}
load: {requests: 1}
"""


class Recorder(Backend):
    """Records calls; ``fail`` provisions raise ServerStartError; tracks peak workers."""

    name = "recorder"

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.calls: list[str] = []
        self.running = self.peak = 0

    async def cleanup_leftovers(self, run_dir: Path) -> list[str]:
        self.calls.append("cleanup")
        return []

    async def prepare(self, deployments: Sequence[AnyDeployment]) -> list[str]:
        self.calls.append("prepare")
        return []

    @contextlib.asynccontextmanager
    async def provision(
        self, worker_id: str, deployment: AnyDeployment, work_dir: Path
    ) -> AsyncIterator[Handle]:
        self.calls.append(f"provision {deployment.name}")
        if self.fail:
            raise ServerStartError(f"{deployment.name} never became ready")
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            yield Handle(Endpoint(base_url="http://127.0.0.1:9", model="m"))
        finally:
            self.running -= 1


def verdict_by_deployment(fail: set[str]) -> Any:
    async def probe(ctx: ProbeContext) -> ProbeOutcome:
        await asyncio.sleep(0.05)  # long enough for parallel workers to overlap
        (name,) = ctx.endpoints
        status = Status.FAIL if name in fail else Status.PASS
        return ProbeOutcome({}, Verdict(status=status, reason=f"{name} scripted"))

    return probe


def run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, execution: str, backend: Recorder
) -> dict[str, Status]:
    monkeypatch.setattr(pipeline, "make_backend", lambda loaded, run_dir: backend)
    loaded = load_campaign_text(HEAD + execution, "fields.yaml")
    run_dir, plan = open_new(loaded, RunOptions(out=tmp_path / "run"))
    outcome = asyncio.run(execute(loaded, run_dir, plan, RunOptions(cpu_budget=None)))
    names = {t.id: plan.workers[t.workers[0]].deployment for t in plan.treatments}
    return {
        names[tid]: Status(state[1]) if state[1] else Status.NOT_RUN
        for tid, state in outcome.ledger_states.items()
    }


@pytest.mark.parametrize("fail_fast", [True, False])
def test_fail_fast_stops_scheduling_after_a_fail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_fast: bool
) -> None:
    monkeypatch.setattr(load_probe, "run", verdict_by_deployment({"a"}))
    execution = f"execution: {{strategy: sequential, fail_fast: {str(fail_fast).lower()}}}\n"
    statuses = run(tmp_path, monkeypatch, execution, Recorder())
    assert statuses["a"] == Status.FAIL
    expected = Status.NOT_RUN if fail_fast else Status.PASS
    assert (statuses["b"], statuses["c"]) == (expected, expected)


@pytest.mark.parametrize(("budget", "peak"), [(1, 1), (2, 2), (3, 3)])
def test_cpu_budget_bounds_the_workers_running_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, budget: int, peak: int
) -> None:
    monkeypatch.setattr(load_probe, "run", verdict_by_deployment(set()))
    backend = Recorder()
    run(
        tmp_path, monkeypatch, f"execution: {{strategy: parallel, cpu_budget: {budget}}}\n", backend
    )
    assert backend.peak == peak  # each sim deployment asks resources.cpu: 1


@pytest.mark.parametrize("retries", [0, 2])
def test_retries_is_the_number_of_extra_attempts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, retries: int
) -> None:
    monkeypatch.setattr(load_probe, "run", verdict_by_deployment(set()))
    backend = Recorder(fail=True)
    execution = f"execution: {{strategy: sequential, retries: {retries}}}\n"
    statuses = run(tmp_path, monkeypatch, execution, backend)
    assert set(statuses.values()) == {Status.ERROR}
    assert backend.calls.count("provision a") == retries + 1


class Failing(Recorder):
    """Every provision fails, each with its own reason."""

    @contextlib.asynccontextmanager
    async def provision(
        self, worker_id: str, deployment: AnyDeployment, work_dir: Path
    ) -> AsyncIterator[Handle]:
        self.calls.append(f"provision {deployment.name}")
        n = self.calls.count(f"provision {deployment.name}")
        raise ServerStartError(f"{deployment.name} failed its attempt {n}")
        yield Handle(Endpoint(base_url="http://127.0.0.1:9", model="m"))  # never reached


def test_an_error_after_retries_also_says_how_the_first_attempt_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pipeline, "make_backend", lambda loaded, run_dir: Failing())
    loaded = load_campaign_text(HEAD + "execution: {retries: 2}\n", "fields.yaml")
    run_dir, plan = open_new(loaded, RunOptions(out=tmp_path / "run"))
    outcome = asyncio.run(execute(loaded, run_dir, plan, RunOptions(cpu_budget=None)))
    reasons = {plan.workers[t.workers[0]].deployment: outcome.verdicts[t.id].reason
               for t in plan.treatments}  # fmt: skip
    assert reasons["a"] == "a failed its attempt 3; the first attempt ended: a failed its attempt 1"


@pytest.mark.parametrize("phase", ["cleanup", "prepare", "test", "final_cleanup"])
def test_each_phase_can_be_switched_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, phase: str
) -> None:
    monkeypatch.setattr(load_probe, "run", verdict_by_deployment(set()))
    backend = Recorder()
    run(tmp_path, monkeypatch, f"execution: {{phases: {{{phase}: false}}}}\n", backend)
    calls = backend.calls
    provisions = [c for c in calls if c.startswith("provision")]
    # cleanup runs first and again at the end (final cleanup); prepare once; test provisions
    expected = {
        "cleanup": (1, 1, 3),
        "prepare": (2, 0, 3),
        "test": (2, 1, 0),
        "final_cleanup": (1, 1, 3),
    }[phase]
    assert (calls.count("cleanup"), calls.count("prepare"), len(provisions)) == expected
    if phase == "cleanup":
        assert calls[-1] == "cleanup"  # the one left is the final one
    if phase == "final_cleanup":
        assert calls[0] == "cleanup"


def test_description_is_kept_with_the_run(tmp_path: Path) -> None:
    loaded = load_campaign_text(HEAD, "fields.yaml")
    run_dir, _ = open_new(loaded, RunOptions(out=tmp_path / "run"))
    meta = json.loads((run_dir.path / "run.json").read_text())
    assert meta["description"] == "nightly regression of the sim fleet"


def test_execution_seed_reaches_every_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[int] = []

    async def probe(ctx: ProbeContext) -> ProbeOutcome:
        seen.append(ctx.seed)
        return ProbeOutcome({}, Verdict(status=Status.PASS))

    monkeypatch.setattr(load_probe, "run", probe)
    run(tmp_path, monkeypatch, "execution: {seed: 4242}\n", Recorder())
    assert seen == [4242, 4242, 4242]
