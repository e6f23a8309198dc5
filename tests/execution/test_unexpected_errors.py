"""An unexpected exception inside a worker set — from the backend or from a probe — is that
treatment's ERROR with its cause (type and message, in summary.json and on the terminal);
the run goes on, exits 3 and never shows a traceback."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from testbed.backends.base import Backend, Handle
from testbed.cli import main
from testbed.clients.endpoint import Endpoint
from testbed.config.deployments import AnyDeployment
from testbed.core.errors import InputError
from testbed.execution import pipeline
from testbed.probes import load as load_probe
from testbed.probes.base import ProbeContext, ProbeOutcome

CAMPAIGN = """\
name: oops
deployments:
  - name: one
    server: sim
  - name: two
    server: sim
load:
  profile: concurrency
  requests: 2
execution:
  strategy: sequential
  retries: 1
"""


class Provisions(Backend):
    """Hands out an endpoint that is never called, or raises ``error`` for worker ``bad``."""

    name = "scripted"

    def __init__(self, error: BaseException | None = None, bad: str = "") -> None:
        self.error, self.bad, self.calls = error, bad, 0

    @contextlib.asynccontextmanager
    async def provision(
        self, worker_id: str, deployment: AnyDeployment, work_dir: Path
    ) -> AsyncIterator[Handle]:
        self.calls += 1
        if self.error is not None and deployment.name == self.bad:
            raise self.error
        yield Handle(Endpoint(base_url="http://127.0.0.1:9", model="m"))


def run(tmp_path: Path, backend: Backend, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(pipeline, "make_backend", lambda loaded, run_dir: backend)
    monkeypatch.setenv("COLUMNS", "250")  # the terminal's lines unwrapped
    file = tmp_path / "c.yaml"
    file.write_text(CAMPAIGN)
    return main(
        ["run", str(file), "--out", str(tmp_path / "run"), "--index", f"sqlite:///{tmp_path}/i.db"]
    )


def verdicts(tmp_path: Path) -> dict[str, dict[str, Any]]:
    document = json.loads((tmp_path / "run" / "summary.json").read_text())
    return {row["dir"].split("__")[1].split("-")[0]: row for row in document["treatments"]}


@pytest.mark.parametrize(
    "error",
    [NotImplementedError("tgi servers run only in a cluster"), InputError("no such model")],
    ids=["bug", "input-error"],
)
def test_a_backend_exception_is_the_treatments_error(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    error: Exception,
) -> None:
    async def passes(ctx: ProbeContext) -> ProbeOutcome:
        from testbed.results.verdict import Status, Verdict

        return ProbeOutcome({}, Verdict(status=Status.PASS, reason="fine"))

    monkeypatch.setattr(load_probe, "run", passes)
    backend = Provisions(error, bad="one")
    assert run(tmp_path, backend, monkeypatch) == 3
    rows = verdicts(tmp_path)
    cause = f"{type(error).__name__}: {error}"
    assert rows["one"]["status"] == "ERROR"
    assert cause in rows["one"]["reason"]
    assert rows["two"]["status"] == "PASS"  # the other worker set carried on
    assert backend.calls == 2  # an unexpected error is not retried
    out = capsys.readouterr()
    assert cause in out.out
    assert "Traceback" not in out.out + out.err


def test_a_probe_exception_is_the_treatments_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def crashes(ctx: ProbeContext) -> ProbeOutcome:
        raise KeyError("ttft_ms")

    monkeypatch.setattr(load_probe, "run", crashes)
    assert run(tmp_path, Provisions(), monkeypatch) == 3
    rows = verdicts(tmp_path)
    assert {row["status"] for row in rows.values()} == {"ERROR"}
    assert "probe crashed: KeyError: 'ttft_ms'" in rows["one"]["reason"]
    treatment = tmp_path / "run" / rows["one"]["dir"]
    assert "KeyError" in (treatment / "error.txt").read_text()  # the traceback, on disk only
    out = capsys.readouterr()
    assert "probe crashed: KeyError" in out.out
    assert "Traceback" not in out.out + out.err
