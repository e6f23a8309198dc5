"""A run refused its turn before anything ran (``--no-wait`` and a shared cluster's Lease
held by another run) leaves no run folder: there was never a run to report or resume
(issue 32). A resumed run keeps its folder whatever happens."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from testbed.backends.base import Backend, Handle
from testbed.backends.kubernetes.lease import ClusterBusy
from testbed.cli import main
from testbed.config.deployments import AnyDeployment
from testbed.execution import pipeline

CAMPAIGN = "name: busy\ndeployments:\n  - {name: a, server: sim}\nload: {requests: 1}\n"


class Busy(Backend):
    """The cluster's turn is another run's (after ``free`` turns given); provisioning is
    never reached."""

    name = "busy"

    def __init__(self) -> None:
        self.provisioned = 0
        self.free = 0

    @contextlib.asynccontextmanager
    async def exclusive(self, wait: bool, say: Callable[[str], None]) -> AsyncIterator[None]:
        if self.free:
            self.free -= 1
            yield
            return
        say("waiting for other@host since 12:00:00")
        raise ClusterBusy("the cluster is in use: other@host since 12:00:00; --no-wait given")
        yield  # pragma: no cover - never reached

    @contextlib.asynccontextmanager
    async def provision(
        self, worker_id: str, deployment: AnyDeployment, work_dir: Path
    ) -> AsyncIterator[Handle]:
        self.provisioned += 1
        raise AssertionError("a refused run provisions nothing")
        yield  # pragma: no cover - never reached


@pytest.fixture
def busy(monkeypatch: pytest.MonkeyPatch) -> Busy:
    backend = Busy()
    monkeypatch.setattr(pipeline, "make_backend", lambda loaded, run_dir: backend)
    return backend


def test_a_run_refused_its_turn_leaves_no_folder(
    tmp_path: Path, busy: Busy, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "c.yaml").write_text(CAMPAIGN)
    out = tmp_path / "rc"
    assert main(["run", str(tmp_path / "c.yaml"), "--out", str(out)]) == 3
    assert not out.exists()
    err = capsys.readouterr().err
    assert "--no-wait given — nothing ran" in err
    assert f"{out} was removed" in err
    assert busy.provisioned == 0


def test_a_resumed_run_refused_its_turn_keeps_its_folder(
    tmp_path: Path, busy: Busy, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "c.yaml").write_text(CAMPAIGN)
    out = tmp_path / "rc"
    busy.free = 1  # the first attempt gets its turn, plans and stops before the test
    main(["run", str(tmp_path / "c.yaml"), "--out", str(out), "--skip-phase", "test"])
    before = sorted(p.name for p in out.iterdir())
    assert "run.json" in before
    capsys.readouterr()
    assert main(["run", "--resume", str(out)]) == 3
    assert sorted(p.name for p in out.iterdir()) == before
    err = capsys.readouterr().err
    assert "nothing ran" in err
    assert "was removed" not in err
