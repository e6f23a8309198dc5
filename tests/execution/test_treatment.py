"""Running a treatment hands its probe the plan's own settings model: the section the
planner validated (a matrix level applied), not a dict, and not validated again."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from testbed.backends.base import Backend, Handle
from testbed.clients.endpoint import Endpoint
from testbed.config.deployments import AnyDeployment
from testbed.config.load import LoadProbe
from testbed.config.loader import load_campaign_text
from testbed.execution import pipeline
from testbed.execution.pipeline import execute, open_new
from testbed.execution.run import RunOptions
from testbed.probes import load as load_probe
from testbed.probes.base import ProbeContext, ProbeOutcome
from testbed.results.verdict import Status, Verdict

CAMPAIGN = """\
name: settings
deployments:
  - {name: a, server: sim}
matrix:
  factors:
    load.concurrency: [2, 3]
load: {requests: 1}
"""


class Nowhere(Backend):
    """Provisions nothing: the probe below never sends a request."""

    name = "nowhere"

    @contextlib.asynccontextmanager
    async def provision(
        self, worker_id: str, deployment: AnyDeployment, work_dir: Path
    ) -> AsyncIterator[Handle]:
        yield Handle(Endpoint(base_url="http://127.0.0.1:9", model="m"))


def test_the_probe_gets_the_plans_section_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    given: list[object] = []

    async def probe(ctx: ProbeContext[LoadProbe]) -> ProbeOutcome:
        given.append(ctx.config)
        return ProbeOutcome({}, Verdict(status=Status.PASS, reason="scripted"))

    monkeypatch.setattr(load_probe, "run", probe)
    monkeypatch.setattr(pipeline, "make_backend", lambda loaded, run_dir: Nowhere())
    loaded = load_campaign_text(CAMPAIGN, "settings.yaml")
    run_dir, plan = open_new(loaded, RunOptions(out=tmp_path / "run"))
    asyncio.run(execute(loaded, run_dir, plan, RunOptions(cpu_budget=None)))
    sections = [plan.probe_configs[t.probe_key] for t in plan.treatments]
    assert len(given) == len(sections) == 2
    for got, section in zip(sorted(given, key=id), sorted(sections, key=id), strict=True):
        assert got is section  # the planner's model, not a copy validated again
    assert sorted(s.concurrency for s in given if isinstance(s, LoadProbe)) == [2, 3]
