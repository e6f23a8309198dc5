"""The simulator as a child process (its own core and event loop, as in a real test), a
ProbeContext factory for running the load probe in tests, and a runner aware of the
harness's self-check."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed.clients.endpoint import Endpoint
from testbed.config.load import LoadProbe
from testbed.probes.base import ProbeContext, ProbeOutcome
from testbed.probes.load import run
from testbed.results.files import RecordWriter
from testbed.results.verdict import Status
from testbed.servers.sim.child import sim_process


@pytest.fixture
def simulator() -> Any:
    """The ``sim_process`` factory, for tests that need their own simulator flags."""
    return sim_process


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    """A simulator with TTFT 10 ms and ITL 2 ms, shared by a test module."""
    with sim_process("--ttft-ms", "10", "--itl-ms", "2") as url:
        yield url


@pytest.fixture(scope="module")
def instant_url() -> Iterator[str]:
    """A simulator answering at once."""
    with sim_process() as url:
        yield url


@contextlib.contextmanager
def probe_context(url: str, out: Path, **config: Any) -> Iterator[ProbeContext]:
    with RecordWriter(out / "records.jsonl") as records:
        yield ProbeContext(
            endpoints={"sim": Endpoint(base_url=url)},
            config=LoadProbe.model_validate(config),
            out_dir=out,
            records=records,
            seed=7,
        )


@pytest.fixture
def context() -> Any:
    return probe_context


def distrusted(summary: dict[str, Any], status: str) -> list[str]:
    """The self-check's problems when they made a load summary INCONCLUSIVE (else [])."""
    if status != Status.INCONCLUSIVE:
        return []
    stages = summary.get("stages") or [summary]
    return [problem for stage in stages for problem in stage["selfcheck"]["problems"]]


def run_trusted(url: str, out: Path, attempts: int = 3, **config: Any) -> tuple[ProbeOutcome, Path]:
    """Run the load probe into ``out/<attempt>``, again while the harness's own self-check
    distrusts the run (the machine was too busy to send on time: INCONCLUSIVE by design, not
    the verdict under test). Returns the last outcome and its folder; callers assert on it,
    so a run the harness never trusted fails with the self-check's reason."""
    for attempt in range(attempts):
        folder = out / str(attempt)
        with probe_context(url, folder, **config) as ctx:
            outcome = asyncio.run(run(ctx))
        if not distrusted(outcome.summary, outcome.verdict.status):
            break
    return outcome, folder


@pytest.fixture
def trusted() -> Any:
    """The ``run_trusted`` runner."""
    return run_trusted


@pytest.fixture
def self_check_problems() -> Any:
    """The ``distrusted`` check, for tests that run the probe another way (the CLI)."""
    return distrusted
