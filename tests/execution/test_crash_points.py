"""Crash points of the run directory that the SIGKILL test cannot hit on purpose: a crash
while the metadata is written, and a retry that fails to provision after an interrupted
attempt. Each state left behind must be one that ``--resume`` handles."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from testbed.backends.base import Backend, Handle
from testbed.config.deployments import AnyDeployment
from testbed.config.loader import load_campaign_text
from testbed.core.errors import InputError, ServerStartError
from testbed.execution.events import Silent
from testbed.execution.grouping import make_worker_sets
from testbed.execution.treatment import Setting
from testbed.execution.worker_set import WorkerSetRunner
from testbed.plan.expand import expand
from testbed.results import files, rundir
from testbed.results.ledger import Ledger
from testbed.results.rundir import RunDir

CAMPAIGN = """\
name: crash
deployments:
  - name: sim
    server: sim
load:
  profile: concurrency
  requests: 4
"""


class _Crash(Exception):
    pass


@pytest.mark.parametrize("crash_at", [1, 2, 3])
def test_metadata_crash_leaves_no_half_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, crash_at: int
) -> None:
    """A run directory that has run.json has everything --resume needs; one without is
    refused with a message."""
    calls = []
    real = files.write_atomic

    def crashing(path: Path, text: str) -> None:
        calls.append(path.name)
        if len(calls) == crash_at:
            raise _Crash
        real(path, text)

    monkeypatch.setattr(rundir, "write_atomic", crashing)
    monkeypatch.setattr(files, "write_atomic", crashing)  # write_json goes through it
    run = RunDir.create(tmp_path, "crash", tmp_path / "run")
    with pytest.raises(_Crash):
        run.write_metadata({"run_id": "run"}, {"name": "crash"}, {"treatments": []})
    if (run.path / rundir.RUN_FILE).exists():
        assert (run.path / rundir.RESOLVED).exists()
        assert (run.path / rundir.PLAN).exists()
    else:
        with pytest.raises(InputError, match="start it again"):
            RunDir.existing(run.path)


class FailingBackend(Backend):
    name = "failing"

    @contextlib.asynccontextmanager
    async def provision(
        self, worker_id: str, deployment: AnyDeployment, work_dir: Path
    ) -> AsyncIterator[Handle]:
        raise ServerStartError(f"{worker_id} never became ready")
        yield  # pragma: no cover


async def test_failed_provisioning_keeps_an_interrupted_attempt(tmp_path: Path) -> None:
    loaded = load_campaign_text(CAMPAIGN, "crash.yaml")
    plan = expand(loaded)
    run = RunDir.create(tmp_path, "crash", tmp_path / "run")
    treatment = plan.treatments[0]
    folder = run.treatment(treatment.dirname)
    with Ledger(run.path / rundir.LEDGER) as ledger:
        ledger.register([(treatment.id, treatment.dirname, "", "")])
        ledger.start(treatment.id)  # attempt 1 … killed after two records
        folder.mkdir(parents=True)
        (folder / rundir.RECORDS).write_text('{"n": 0}\n{"n": 1}\n')
        runner = WorkerSetRunner(
            setting=Setting(plan, 0, tmp_path),
            backend=FailingBackend(),
            run_dir=run,
            ledger=ledger,
            observer=Silent(),
            retries=0,
            fail_fast=False,
        )
        for worker_set in make_worker_sets(plan, plan.treatments):
            await runner(worker_set)
        assert ledger.states()[treatment.id][:2] == ("finished", "ERROR")
    summary = json.loads((folder / rundir.SUMMARY).read_text())
    assert summary["verdict"]["status"] == "ERROR"
    assert summary["attempt"] == 2
    assert not (folder / rundir.RECORDS).exists()  # no stale records beside the ERROR
    assert (folder / "attempts" / "1" / rundir.RECORDS).read_text().count("\n") == 2
