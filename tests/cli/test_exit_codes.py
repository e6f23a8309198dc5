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
from testbed.config.deployments import AnyDeployment
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
        self, worker_id: str, deployment: AnyDeployment, work_dir: Path
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
    tmp_path.mkdir(exist_ok=True)
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


def test_a_bug_exits_3_with_one_line_and_the_traceback_in_a_file(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from testbed.cli import validate

    def broken(args: Any) -> int:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(validate, "handle", broken)
    assert main(["validate", "x.yaml"]) == 3
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "internal error: ZeroDivisionError: division by zero" in err
    crash = Path(err.rsplit("the traceback is in ", 1)[1].split(")")[0])
    assert "ZeroDivisionError" in crash.read_text()
    crash.unlink()


def test_worker_exits_with_its_treatments_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from testbed.config.loader import load_campaign_text
    from testbed.plan.expand import expand

    statuses = {"one": Status.INCONCLUSIVE, "two": Status.PASS}
    scripted_run(tmp_path / "first", monkeypatch, statuses)  # patches the probe and backend
    file = tmp_path / "first" / "c.yaml"
    plan = expand(load_campaign_text(CAMPAIGN, str(file)))
    one = next(t.id for t in plan.treatments if t.slug.startswith("one"))
    worker = ["worker", str(file), "--treatment", one]
    assert main([*worker, "--out", str(tmp_path / "w1")]) == 0
    assert main([*worker, "--out", str(tmp_path / "w2"), "--fail-on", "inconclusive"]) == 1


# -- an ERROR exits 3 from every command that decides a status (results.verdict.exit_code) ----


def test_worker_error_exits_3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from testbed.config.loader import load_campaign_text
    from testbed.plan.expand import expand

    statuses = {"one": Status.ERROR, "two": Status.PASS}
    scripted_run(tmp_path / "first", monkeypatch, statuses)
    file = tmp_path / "first" / "c.yaml"
    plan = expand(load_campaign_text(CAMPAIGN, str(file)))
    one = next(t.id for t in plan.treatments if t.slug.startswith("one"))
    assert main(["worker", str(file), "--treatment", one, "--out", str(tmp_path / "w")]) == 3


def test_load_error_verdict_exits_3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken(ctx: ProbeContext) -> ProbeOutcome:
        return ProbeOutcome({}, Verdict(status=Status.ERROR, reason="scripted"))

    monkeypatch.setattr(load_probe, "run", broken)
    code = main(["load", "http://127.0.0.1:9", "--requests", "1", "--out", str(tmp_path / "l")])
    assert code == 3
    summary = json.loads((tmp_path / "l" / "summary.json").read_text())
    assert summary["verdict"]["status"] == "ERROR"


def test_compare_with_a_candidate_error_exits_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert scripted_run(tmp_path / "b", monkeypatch, {"one": Status.PASS, "two": Status.PASS}) == 0
    assert scripted_run(tmp_path / "c", monkeypatch, {"one": Status.PASS, "two": Status.ERROR}) == 3
    base, candidate = str(tmp_path / "b" / "run"), str(tmp_path / "c" / "run")
    # the scripted treatments measure nothing: compared with itself, nothing was compared
    assert main(["compare", base, base, "--no-index", "--force"]) == 5
    assert main(["compare", base, candidate, "--no-index", "--force"]) == 3  # ERROR wins


def _scale_dir(out: Path, workloads: int) -> None:
    from testbed.probes.scale.submitted import SUBMITTED, Header, ObjectRef, Submission, line

    out.mkdir(parents=True)
    header = Header(run="r", prefix="w", namespace="ns", template="t", fingerprint="f")
    lines = [line(header)]
    for index in range(workloads):
        ref = ObjectRef(api_version="batch/v1", kind="Job", name=f"w-{index}")
        work = Submission(
            index=index,
            name=f"w-{index}",
            namespace="ns",
            kind="Job",
            api_version="batch/v1",
            objects=[ref],
            sent_ms=1.0,
            acked_ms=2.0,
            status="created",
        )
        lines.append(line(work))
    (out / SUBMITTED).write_text("".join(lines))


def test_scale_plot_error_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No workload was submitted: the thresholds cannot be judged, an infrastructure ERROR."""
    _scale_dir(tmp_path / "s", workloads=0)
    threshold = "p50 scheduled→running < 1 s"
    assert main(["scale", "plot", "-o", str(tmp_path / "s"), "--threshold", threshold]) == 3
    assert "ERROR: no workload was submitted" in capsys.readouterr().out


def test_scale_clean_that_cannot_delete_exits_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from testbed.cli import scale
    from testbed.core.errors import ClusterAccessDenied

    class Refuses:
        def delete(self, kind: str, name: str, namespace: str, api_version: str) -> bool:
            raise ClusterAccessDenied(f"delete {kind} {name}: forbidden", status=403)

    _scale_dir(tmp_path / "s", workloads=1)
    monkeypatch.setattr(scale, "_kube", lambda args: Refuses())
    assert main(["scale", "clean", "-o", str(tmp_path / "s")]) == 3
