"""Every verdict-deciding command maps statuses to the README's exit codes the same way:
0 PASS/INCONCLUSIVE/SKIPPED · 1 FAIL (and INCONCLUSIVE with ``--fail-on inconclusive``) ·
3 ERROR or a treatment never run."""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed.backends.base import Backend, Handle
from testbed.cli import main
from testbed.clients.endpoint import Endpoint
from testbed.execution import pipeline
from testbed.probes import load as load_probe
from testbed.probes.base import ProbeContext, ProbeOutcome
from testbed.results.verdict import Status, Verdict
from testbed.servers.sim.child import sim_process

CAMPAIGN = """\
name: codes
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
"""


class Hands(Backend):
    """Hands out an endpoint the scripted probe never calls."""

    name = "scripted"

    @contextlib.asynccontextmanager
    async def provision(
        self, worker_id: str, deployment: dict[str, Any], work_dir: Path
    ) -> AsyncIterator[Handle]:
        yield Handle(Endpoint(base_url="http://127.0.0.1:9", model="m"))


def scripted_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, statuses: dict[str, Status], *flags: str
) -> int:
    """``testbed run`` whose load treatment on deployment NAME ends ``statuses[NAME]``."""

    async def decides(ctx: ProbeContext) -> ProbeOutcome:
        name = ctx.deployment["name"]
        return ProbeOutcome({}, Verdict(status=statuses[name], reason=f"scripted for {name}"))

    monkeypatch.setattr(load_probe, "run", decides)
    monkeypatch.setattr(pipeline, "make_backend", lambda loaded, run_dir: Hands())
    file = tmp_path / "c.yaml"
    file.write_text(CAMPAIGN)
    out = ["--out", str(tmp_path / "run"), "--index", f"sqlite:///{tmp_path}/i.db"]
    return main(["run", str(file), *out, *flags])


@pytest.mark.parametrize(
    ("one", "two", "code"),
    [
        (Status.PASS, Status.INCONCLUSIVE, 0),
        (Status.FAIL, Status.ERROR, 1),  # FAIL is the most severe (results.verdict.SEVERITY)
        (Status.PASS, Status.ERROR, 3),
    ],
)
def test_run_and_report_exit_with_the_runs_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one: Status, two: Status, code: int
) -> None:
    assert scripted_run(tmp_path, monkeypatch, {"one": one, "two": two}) == code
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert sorted(row["status"] for row in summary["treatments"]) == sorted([one, two])
    assert main(["report", str(tmp_path / "run"), "--no-index"]) == code


def test_fail_on_inconclusive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    statuses = {"one": Status.PASS, "two": Status.INCONCLUSIVE}
    assert scripted_run(tmp_path, monkeypatch, statuses, "--fail-on", "inconclusive") == 1
    run = str(tmp_path / "run")
    assert main(["report", run, "--no-index"]) == 0
    assert main(["report", run, "--no-index", "--fail-on", "inconclusive"]) == 1


def test_a_treatment_never_run_is_not_run_and_exits_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripted_run(tmp_path, monkeypatch, {"one": Status.PASS, "two": Status.PASS})
    run = tmp_path / "run"
    unrun = next(p for p in run.iterdir() if "__two" in p.name)
    (unrun / "summary.json").unlink()  # as a run killed before that treatment ended
    assert main(["report", str(run), "--no-index"]) == 3
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == Status.NOT_RUN
    assert "NOT RUN" in (run / "junit.xml").read_text()


def test_fail_on_refuses_an_unknown_status(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["report", "somewhere", "--fail-on", "pass"])
    assert exited.value.code == 2
    assert "--fail-on" in capsys.readouterr().err


# -- testbed load, against a real simulator ---------------------------------------------------


@pytest.fixture(scope="module")
def sim() -> Iterator[str]:
    with sim_process("--ttft-ms", "2", "--itl-ms", "1") as url:
        yield url


def load(url: str, out: Path, *flags: str) -> tuple[int, dict[str, Any]]:
    args = ["load", url, "--requests", "3", "--output-tokens", "4", "--no-plots"]
    code = main([*args, "--out", str(out), *flags])
    summary = out / "summary.json"
    return code, json.loads(summary.read_text()) if summary.exists() else {}


def test_load_inconclusive_exits_0_unless_failed_on(sim: str, tmp_path: Path) -> None:
    """A warm-up longer than the stage leaves no request in the steady-state window."""
    code, summary = load(sim, tmp_path / "a", "--warmup", "5")
    assert summary["verdict"]["status"] == "INCONCLUSIVE"
    assert code == 0
    code, summary = load(sim, tmp_path / "b", "--warmup", "5", "--fail-on", "inconclusive")
    assert summary["verdict"]["status"] == "INCONCLUSIVE"
    assert code == 1


def test_load_every_request_failing_is_a_fail(tmp_path: Path) -> None:
    with sim_process("--error-rate", "1") as url:
        code, summary = load(url, tmp_path)
    assert summary["verdict"]["status"] == "FAIL", summary["verdict"]
    assert "every one of 3 requests failed" in summary["verdict"]["reason"]
    assert code == 1


def test_load_against_nothing_is_an_infrastructure_error(tmp_path: Path) -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    code, summary = load(f"http://127.0.0.1:{port}", tmp_path)
    assert code == 3
    assert summary == {}
