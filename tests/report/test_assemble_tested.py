"""Nothing tested, decided over an exported pipeline's folders (issue 32): each ``testbed
worker`` exits 5 when its one treatment tested nothing (SKIPPED, or no request sent) and 0
when it ran; ``testbed report`` over the task folders exits 5 only when no folder's treatment
tested anything, 0 (the skip shown, fatal with ``--fail-on skipped``) when one did, and 3 when
a treatment has no folder at all (NOT RUN beats nothing tested)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from testbed.cli import main
from testbed.config.loader import load_campaign_text
from testbed.core.errors import EXIT_FAILED, EXIT_INFRA, EXIT_NOTHING_TESTED, EXIT_OK
from testbed.execution import pipeline
from testbed.plan.expand import expand
from testbed.probes import load as load_probe
from testbed.probes.base import ProbeContext, ProbeOutcome
from testbed.results.verdict import Status, Verdict
from tests.cli.test_exit_codes import CAMPAIGN, Hands

#: a load treatment that ran and sent requests, and one whose stages sent none
SENT = {"requests": {"total": 2}}
NONE_SENT = {"requests": {"total": 0}}


def workers(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    outcomes: dict[str, tuple[Status, dict[str, Any]]],
) -> dict[str, tuple[int, Path]]:
    """``testbed worker`` of each treatment named in ``outcomes`` (by deployment), whose
    probe ends as scripted there; each one's exit code and run folder."""

    async def decides(ctx: ProbeContext) -> ProbeOutcome:
        status, summary = outcomes[ctx.deployment["name"]]
        return ProbeOutcome(summary, Verdict(status=status, reason=f"scripted: {status.value}"))

    monkeypatch.setattr(load_probe, "run", decides)
    monkeypatch.setattr(pipeline, "make_backend", lambda loaded, run_dir: Hands())
    file = tmp_path / "c.yaml"
    file.write_text(CAMPAIGN)
    plan = expand(load_campaign_text(CAMPAIGN, str(file)))
    ids = {t.slug.split("-")[0]: t.id for t in plan.treatments}
    done = {}
    for name in outcomes:
        out = tmp_path / "tasks" / f"task-{name}"
        code = main(["worker", str(file), "--treatment", ids[name], "--out", str(out)])
        done[name] = (code, out)
    return done


def report(folders: list[Path], out: Path, *flags: str) -> tuple[int, dict[str, Any]]:
    code = main(["report", *map(str, folders), "--out", str(out), "--no-index", *flags])
    return code, json.loads((out / "summary.json").read_text())


def test_one_task_skipped_one_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    outcomes = {"one": (Status.SKIPPED, {}), "two": (Status.PASS, SENT)}
    done = workers(tmp_path, monkeypatch, outcomes)
    assert done["one"][0] == EXIT_NOTHING_TESTED
    assert done["two"][0] == EXIT_OK
    folders = [out for _, out in done.values()]
    code, summary = report(folders, tmp_path / "all")
    assert code == EXIT_OK
    assert summary["tested"] is True
    assert summary["skipped"] == {"treatments": 1, "cases": 0}
    assert "skipped: 1 treatment" in capsys.readouterr().out
    assert report(folders, tmp_path / "strict", "--fail-on", "skipped")[0] == EXIT_FAILED


def test_every_task_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    done = workers(
        tmp_path, monkeypatch, {"one": (Status.SKIPPED, {}), "two": (Status.SKIPPED, {})}
    )
    assert {code for code, _ in done.values()} == {EXIT_NOTHING_TESTED}
    capsys.readouterr()
    code, summary = report([out for _, out in done.values()], tmp_path / "all")
    assert code == EXIT_NOTHING_TESTED
    assert (summary["status"], summary["tested"]) == ("SKIPPED", False)
    out = " ".join(capsys.readouterr().out.split())
    assert "nothing was tested: all 2 treatment(s) were skipped; first:" in out


def test_a_task_that_sent_no_request_tested_nothing_either(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A treatment that ran but sent no request is not a test: with the other skipped, the
    report exits 5 — though its status (INCONCLUSIVE) alone would be 0."""
    outcomes = {"one": (Status.INCONCLUSIVE, NONE_SENT), "two": (Status.SKIPPED, {})}
    done = workers(tmp_path, monkeypatch, outcomes)
    assert done["one"][0] == EXIT_NOTHING_TESTED
    capsys.readouterr()
    code, summary = report([out for _, out in done.values()], tmp_path / "all")
    assert code == EXIT_NOTHING_TESTED
    assert (summary["status"], summary["tested"]) == ("INCONCLUSIVE", False)
    out = " ".join(capsys.readouterr().out.split())
    assert "nothing was tested: no case ran and no request was sent" in out


def test_a_task_with_no_folder_is_not_run_not_nothing_tested(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workers(tmp_path, monkeypatch, {"one": (Status.SKIPPED, {})})
    # the folder the pipeline's tasks uploaded into, where two's never arrived
    code, summary = report([tmp_path / "tasks"], tmp_path / "all")
    assert code == EXIT_INFRA
    rows = {row["dir"].split("__")[1].split("-")[0]: row for row in summary["treatments"]}
    assert rows["two"]["status"] == "NOT RUN"
    assert rows["two"]["reason"] == "not run: no run folder holds it"
