"""The in-cluster worker (a run's probe Job) is a capability of its backend, not a flag of
the run: whichever backend says ``probe_job`` runs the treatment's probe and nothing else —
no steps, no captures — and one that does not say it runs them all (the same campaign)."""

from __future__ import annotations

import textwrap
from collections.abc import Collection, Sequence
from pathlib import Path

import pytest

from testbed.backends.local.backend import LocalBackend
from testbed.config.loader import LoadedCampaign, load_campaign_text
from testbed.execution import pipeline
from testbed.execution.pipeline import execute, open_new
from testbed.execution.run import RunOptions
from testbed.results.rundir import RunDir

CAMPAIGN = textwrap.dedent(
    """\
    name: job
    deployments: [{name: sim, server: sim, params: {ttft_ms: 1, itl_ms: 1}}]
    load:
      requests: 2
      dataset: {kind: synthetic, input_tokens: 8, output_tokens: 2}
      selfcheck: {max_lag_p99_ms: 250, max_cpu_fraction: 1.0}
    steps:
      prepare:
        - {name: mark, run: [sh, -c, 'touch "$TESTBED_RUN_DIR/prepared"']}
    execution:
      capture: {state: true}
    """
)


class Recording(LocalBackend):
    """The local backend, counting the state captures asked of it."""

    captured: list[Path]

    async def capture_state(
        self, folder: Path, workers: Collection[str] | None = None, namespaces: Sequence[str] = ()
    ) -> list[str]:
        self.captured.append(folder)
        return await super().capture_state(folder, workers, namespaces)


class ProbeJob(Recording):
    probe_job = True


async def run_with(
    backend_type: type[Recording], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, Recording, str]:
    made: list[Recording] = []

    def make_backend(loaded: LoadedCampaign, run_dir: RunDir) -> Recording:
        backend = backend_type(run_dir.path, loaded.base_dir)
        backend.captured = []
        made.append(backend)
        return backend

    monkeypatch.setattr(pipeline, "make_backend", make_backend)
    loaded = load_campaign_text(CAMPAIGN, str(tmp_path / "job.yaml"))
    run_dir, plan = open_new(loaded, RunOptions(out=tmp_path / "run"))
    outcome = await execute(loaded, run_dir, plan, RunOptions())
    (verdict,) = outcome.verdicts.values()
    return run_dir.path, made[0], verdict.status.value


async def test_a_probe_job_backend_runs_the_probe_and_no_steps_or_captures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, backend, status = await run_with(ProbeJob, tmp_path, monkeypatch)
    assert status == "PASS"  # the probe ran, here
    assert not (root / "prepared").exists()  # the run's controller runs the steps
    assert backend.captured == []  # and the captures


async def test_any_other_backend_runs_the_steps_and_captures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, backend, status = await run_with(Recording, tmp_path, monkeypatch)
    assert status == "PASS"
    assert (root / "prepared").exists()
    assert len(backend.captured) == 2  # before and after the one treatment
