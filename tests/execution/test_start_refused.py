"""A server that refuses what it was given is not started again (issue 32): the same start
fails the same way, so a retry only doubles the wait. A start that failed otherwise is
retried (``execution.retries``), and says so — never silently."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from testbed.backends.base import Backend, Handle
from testbed.cli import main
from testbed.config.deployments import AnyDeployment
from testbed.core.errors import InfrastructureError, ServerRefused, ServerStartError
from testbed.execution import pipeline

CAMPAIGN = "name: refused\ndeployments:\n  - {name: a, server: sim}\nload: {requests: 1}\n"


class NeverStarts(Backend):
    """Every start fails with ``error``."""

    name = "never"

    def __init__(self, error: InfrastructureError) -> None:
        self.error = error
        self.starts = 0

    @contextlib.asynccontextmanager
    async def provision(
        self, worker_id: str, deployment: AnyDeployment, work_dir: Path
    ) -> AsyncIterator[Handle]:
        self.starts += 1
        raise self.error
        yield  # pragma: no cover - never reached


def run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: InfrastructureError
) -> tuple[int, NeverStarts, dict[str, Any]]:
    backend = NeverStarts(error)
    monkeypatch.setattr(pipeline, "make_backend", lambda loaded, run_dir: backend)
    (tmp_path / "c.yaml").write_text(CAMPAIGN)
    code = main(["run", str(tmp_path / "c.yaml"), "--out", str(tmp_path / "run")])
    (summary,) = [json.loads(p.read_text()) for p in (tmp_path / "run").glob("*/summary.json")]
    return code, backend, summary


def test_a_refused_start_is_an_error_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    refused = ServerRefused("a (hf) exited with code 2 before becoming ready: no weights")
    code, backend, summary = run(tmp_path, monkeypatch, refused)
    assert code == 3
    assert backend.starts == 1
    assert summary["verdict"]["status"] == "ERROR"
    assert summary["verdict"]["reason"] == str(refused)
    assert "retrying" not in capsys.readouterr().out


def test_another_failed_start_is_retried_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    failed = ServerStartError("a (sim) exited with code 1 before becoming ready: port taken")
    code, backend, _ = run(tmp_path, monkeypatch, failed)
    assert code == 3
    assert backend.starts == 2  # execution.retries: 1
    out = " ".join(capsys.readouterr().out.split())  # the terminal may wrap the line
    assert "did not start, retrying: a (sim) exited with code 1" in out
