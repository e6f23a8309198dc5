"""Never a silent green: a run that tested nothing exits 5 (``EXIT_NOTHING_TESTED``) with the
reason, from ``run``, ``report`` and ``worker`` alike; a partial skip exits 0 but is shown in
the summary and the report, and ``--fail-on skipped`` makes it exit 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed.cli import main
from testbed.core.errors import (
    EXIT_FAILED,
    EXIT_INFRA,
    EXIT_INPUT,
    EXIT_INTERRUPTED,
    EXIT_NOTHING_TESTED,
    EXIT_OK,
)
from testbed.results.verdict import Status, exit_code
from tests.cli.test_exit_codes import CAMPAIGN, scripted_run

EXAMPLES = Path(__file__).parents[2] / "examples"


def test_nothing_tested_has_a_code_of_its_own() -> None:
    others = {EXIT_OK, EXIT_FAILED, EXIT_INPUT, EXIT_INFRA, EXIT_INTERRUPTED}
    assert EXIT_NOTHING_TESTED not in others
    assert exit_code(Status.SKIPPED) == EXIT_NOTHING_TESTED
    assert exit_code(Status.SKIPPED, {Status.SKIPPED}) == EXIT_NOTHING_TESTED
    assert exit_code(Status.PASS, partly_skipped=True) == EXIT_OK
    assert exit_code(Status.PASS, {Status.SKIPPED}, partly_skipped=True) == EXIT_FAILED
    assert exit_code(Status.INCONCLUSIVE, {Status.SKIPPED}, partly_skipped=True) == EXIT_FAILED
    assert exit_code(Status.PASS, {Status.SKIPPED}) == EXIT_OK  # nothing was skipped
    assert exit_code(Status.ERROR, {Status.SKIPPED}, partly_skipped=True) == EXIT_INFRA


def test_a_run_whose_every_treatment_skipped_exits_5_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    statuses = {"one": Status.SKIPPED, "two": Status.SKIPPED}
    assert scripted_run(tmp_path, monkeypatch, statuses) == EXIT_NOTHING_TESTED
    out = capsys.readouterr().out
    assert "nothing was tested: all 2 treatment(s) were skipped; first:" in out
    assert "scripted for one" in out
    run = tmp_path / "run"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "SKIPPED"
    assert summary["skipped"] == {"treatments": 2, "cases": 0}
    assert main(["report", str(run), "--no-index"]) == EXIT_NOTHING_TESTED


def test_a_partial_skip_is_shown_and_fatal_only_on_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    statuses = {"one": Status.PASS, "two": Status.SKIPPED}
    assert scripted_run(tmp_path, monkeypatch, statuses) == EXIT_OK
    assert "skipped: 1 treatment" in capsys.readouterr().out
    run = tmp_path / "run"
    summary = json.loads((run / "summary.json").read_text())
    assert (summary["status"], summary["skipped"]) == ("PASS", {"treatments": 1, "cases": 0})
    assert "skipped: 1 treatment" in (run / "report.html").read_text()
    assert main(["report", str(run), "--no-index", "--fail-on", "skipped"]) == EXIT_FAILED
    again = tmp_path / "again"
    assert scripted_run(again, monkeypatch, statuses, "--fail-on", "skipped") == EXIT_FAILED


def test_cases_skipped_inside_a_passing_correctness_run_count_as_a_skip(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Against a real simulator: a case whose rule skips it on ``sim`` leaves the treatment
    PASS, but the run says it skipped a case, and ``--fail-on skipped`` exits 1."""
    cases = EXAMPLES / "cases" / "sim.yaml"
    skipper = tmp_path / "skipper.yaml"
    skipper.write_text(
        "- name: never-on-sim\n  request: {prompt: hi, max_new_tokens: 2}\n"
        "  expected: {text: x}\n  skip: [{when: {server: sim}}]\n"
    )
    file = tmp_path / "c.yaml"
    file.write_text(
        "name: partly\ndeployments:\n  - name: one\n    server: sim\n"
        "    params: {seed: 0, max_model_len: 256}\n"
        f"correctness:\n  cases: [{cases}, {skipper}]\n  protocol: openai\n"
    )
    index = ["--index", f"sqlite:///{tmp_path}/i.db"]
    assert main(["run", str(file), "--out", str(tmp_path / "a"), *index]) == EXIT_OK
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["status"] == "PASS"
    skipped = summary["skipped"]["cases"]
    assert skipped >= 1  # never-on-sim, and the rules of sim.yaml's own
    assert summary["treatments"][0]["reason"].endswith(f", {skipped} skipped")
    assert f"skipped: {skipped} case" in capsys.readouterr().out
    flags = ["--fail-on", "skipped"]
    assert main(["run", str(file), "--out", str(tmp_path / "b"), *index, *flags]) == EXIT_FAILED


def test_a_correctness_run_whose_every_case_skips_exits_5(tmp_path: Path) -> None:
    skipper = tmp_path / "skipper.yaml"
    skipper.write_text(
        "- name: never-on-sim\n  request: {prompt: hi, max_new_tokens: 2}\n"
        "  expected: {text: x}\n  skip: [{when: {server: sim}}]\n"
    )
    file = tmp_path / "c.yaml"
    file.write_text(
        f"name: none\ndeployments:\n  - {{name: one, server: sim}}\ncorrectness:\n"
        f"  cases: [{skipper}]\n"
    )
    out = ["--out", str(tmp_path / "run"), "--index", f"sqlite:///{tmp_path}/i.db"]
    assert main(["run", str(file), *out]) == EXIT_NOTHING_TESTED
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["treatments"][0]["reason"] == "every case was skipped"


def test_a_worker_whose_treatment_tested_nothing_exits_5(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from testbed.config.loader import load_campaign_text
    from testbed.plan.expand import expand

    statuses = {"one": Status.SKIPPED, "two": Status.PASS}
    scripted_run(tmp_path / "first", monkeypatch, statuses)  # patches the probe and backend
    file = tmp_path / "first" / "c.yaml"
    plan = expand(load_campaign_text(CAMPAIGN, str(file)))
    ids = {t.slug.split("-")[0]: t.id for t in plan.treatments}
    worker = ["worker", str(file), "--treatment"]
    assert main([*worker, ids["one"], "--out", str(tmp_path / "w1")]) == EXIT_NOTHING_TESTED
    assert main([*worker, ids["two"], "--out", str(tmp_path / "w2")]) == EXIT_OK


def test_load_that_sent_no_request_tested_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A load treatment whose every stage sent nothing (INCONCLUSIVE: no request in the
    window) is not a green run: ``run`` and ``load`` exit 5."""
    from testbed.execution import pipeline
    from testbed.probes import load as load_probe
    from testbed.probes.base import ProbeContext, ProbeOutcome
    from testbed.results.verdict import Verdict
    from tests.cli.test_exit_codes import Hands

    sent = {"one": 0, "two": 0}

    async def idle(ctx: ProbeContext) -> ProbeOutcome:
        total = sent.get(ctx.deployment.get("name", ""), 0)
        summary = {"requests": {"total": total, "ok": total, "errors": 0}}
        return ProbeOutcome(summary, Verdict(status=Status.INCONCLUSIVE, reason="no request"))

    monkeypatch.setattr(load_probe, "run", idle)
    monkeypatch.setattr(pipeline, "make_backend", lambda loaded, run_dir: Hands())
    file = tmp_path / "c.yaml"
    file.write_text(CAMPAIGN)
    index = ["--index", f"sqlite:///{tmp_path}/i.db"]
    assert main(["run", str(file), "--out", str(tmp_path / "a"), *index]) == EXIT_NOTHING_TESTED
    assert "nothing was tested: no case ran and no request was sent" in capsys.readouterr().out
    assert json.loads((tmp_path / "a" / "summary.json").read_text())["tested"] is False
    sent["two"] = 3  # one treatment that sent requests is a tested run
    assert main(["run", str(file), "--out", str(tmp_path / "b"), *index]) == EXIT_OK
    load = ["load", "http://127.0.0.1:9", "--requests", "1", "--no-plots", "--json"]
    assert main([*load, "--out", str(tmp_path / "l")]) == EXIT_NOTHING_TESTED
