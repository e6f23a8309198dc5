"""A final cleanup that fails (the API server gone) does not cost the run its results:
summary.json, junit.xml and report.html are written, then the failure is reported, exit 3.
And a Kubernetes cleanup that fails says objects may remain only when the run created some."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from testbed.backends.base import Backend, Handle
from testbed.cli import main
from testbed.clients.endpoint import Endpoint
from testbed.config.deployments import AnyDeployment
from testbed.core.errors import ClusterAccessDenied, ClusterUnreachable
from testbed.execution import pipeline
from testbed.probes import load as load_probe
from testbed.probes.base import ProbeContext, ProbeOutcome
from testbed.results.verdict import Status, Verdict

CAMPAIGN = "name: gone\ndeployments:\n  - {name: a, server: sim}\nload: {requests: 1}\n"


class ApiServerGone(Backend):
    """Serves; the first cleanup works, the final one finds the API server gone."""

    name = "gone"

    def __init__(self) -> None:
        self.cleanups = 0

    async def cleanup_leftovers(self, run_dir: Path) -> list[str]:
        self.cleanups += 1
        if self.cleanups > 1:
            raise ClusterUnreachable("cannot reach https://127.0.0.1:6443: connection refused")
        return []

    @contextlib.asynccontextmanager
    async def provision(
        self, worker_id: str, deployment: AnyDeployment, work_dir: Path
    ) -> AsyncIterator[Handle]:
        yield Handle(Endpoint(base_url="http://127.0.0.1:9", model="m"))


def test_results_are_written_before_a_failed_final_cleanup_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def passes(ctx: ProbeContext) -> ProbeOutcome:
        return ProbeOutcome({}, Verdict(status=Status.PASS, reason="scripted"))

    monkeypatch.setattr(load_probe, "run", passes)
    monkeypatch.setattr(pipeline, "make_backend", lambda loaded, run_dir: ApiServerGone())
    (tmp_path / "c.yaml").write_text(CAMPAIGN)
    run = tmp_path / "run"
    index = f"sqlite:///{tmp_path}/i.db"
    code = main(["run", str(tmp_path / "c.yaml"), "--out", str(run), "--index", index])
    assert code == 3
    summary = json.loads((run / "summary.json").read_text())
    assert [row["status"] for row in summary["treatments"]] == ["PASS"]
    assert (run / "report.html").is_file()
    assert (run / "junit.xml").is_file()
    err = capsys.readouterr().err
    assert "final cleanup failed: cannot reach https://127.0.0.1:6443" in err
    assert "internal error" not in err


async def test_a_cleanup_denied_says_objects_may_remain_only_after_an_apply(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from testbed.backends.kubernetes import KubernetesBackend
    from testbed.backends.kubernetes.backend import OBJECTS_MARKER

    backend = KubernetesBackend(tmp_path / "run-1", {"kind": "kubernetes"})
    (tmp_path / "run-1").mkdir()

    async def denied() -> list[str]:
        raise ClusterAccessDenied("401 Unauthorized: the token is wrong", status=401)

    monkeypatch.setattr(backend, "_cleanup", denied)
    with pytest.raises(ClusterAccessDenied) as fresh:
        await backend.cleanup_leftovers(tmp_path / "run-1")
    assert "may remain" not in str(fresh.value)
    assert "nothing of run run-1 was created" in str(fresh.value)
    (tmp_path / "run-1" / OBJECTS_MARKER).touch()  # as after an apply (also a resumed run's)
    with pytest.raises(ClusterAccessDenied) as after:
        await backend.cleanup_leftovers(tmp_path / "run-1")
    assert "objects of run run-1 may remain" in str(after.value)
