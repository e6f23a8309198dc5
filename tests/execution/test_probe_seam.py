"""The probe seam (``Backend.run_probe``): the pipeline hands every treatment's probe to
its backend. A backend that runs probes elsewhere gets the attempt (treatment, workers'
configs and handles, the record writer) and its outcome is the treatment's, written like
any probe's; the default runs the probe here."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from testbed.backends.base import Backend, Handle, ProbeRun
from testbed.cli import main
from testbed.clients.endpoint import Endpoint
from testbed.config.deployments import AnyDeployment
from testbed.execution import pipeline
from testbed.results.files import read_records
from testbed.results.outcome import ProbeOutcome
from testbed.results.verdict import Status, Verdict

CAMPAIGN = """\
name: seam
deployments:
  - name: one
    server: sim
load:
  profile: concurrency
  requests: 2
"""


class Elsewhere(Backend):
    """Runs each probe "elsewhere": writes two records through the run and answers FAIL,
    never calling the in-process probe (its endpoint would refuse every request)."""

    name = "elsewhere"

    def __init__(self) -> None:
        self.runs: list[ProbeRun] = []

    @contextlib.asynccontextmanager
    async def provision(
        self, worker_id: str, deployment: AnyDeployment, work_dir: Path
    ) -> AsyncIterator[Handle]:
        yield Handle(Endpoint(base_url="http://127.0.0.1:9", model="m"))

    async def run_probe(
        self, run: ProbeRun, here: Callable[[], Awaitable[ProbeOutcome]]
    ) -> ProbeOutcome:
        del here
        self.runs.append(run)
        for n in range(2):
            run.records.write({"n": n, "where": "elsewhere"})
        (run.out_dir / "remote.txt").write_text("sent back")
        verdict = Verdict(status=Status.FAIL, reason="judged elsewhere")
        return ProbeOutcome(summary={"ran": "elsewhere"}, verdict=verdict)


def test_a_backend_that_runs_probes_elsewhere_owns_the_treatments_outcome(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = Elsewhere()
    monkeypatch.setattr(pipeline, "make_backend", lambda loaded, run_dir: backend)
    file = tmp_path / "c.yaml"
    file.write_text(CAMPAIGN)
    out = tmp_path / "run"
    argv = ["run", str(file), "--out", str(out), "--index", f"sqlite:///{tmp_path}/i.db"]
    assert main(argv) == 1  # the FAIL judged elsewhere is the run's
    (run,) = backend.runs
    assert run.attempt == 1
    assert run.campaign is None  # the local settings ship nothing: probes run here
    assert [c.name for c in run.workers.values()] == ["one"]
    assert set(run.handles) == set(run.workers)
    (folder,) = [p for p in out.iterdir() if p.name.startswith("001__")]
    assert folder == run.out_dir
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["verdict"]["status"] == "FAIL"
    assert summary["verdict"]["reason"] == "judged elsewhere"
    assert summary["ran"] == "elsewhere"
    assert summary["records"] == 2
    assert [r["n"] for r in read_records(folder / "records.jsonl")] == [0, 1]
    assert (folder / "remote.txt").read_text() == "sent back"
