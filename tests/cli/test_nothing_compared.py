"""``testbed compare`` and ``testbed scale plot`` never read as green having looked at nothing
(issue 32): a comparison that compared nothing — every pair SKIPPED on a side, no pair at
all — exits 5 with the reason; a skipped pair beside compared ones stays visible and exits 0;
``scale plot`` whose thresholds found no workload at their start exits 5. ``scale clean``
only deletes: PASS or ERROR, never 5 (tests/cli/test_exit_codes.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed.cli import main
from testbed.core.errors import EXIT_NOTHING_TESTED, EXIT_OK
from testbed.execution import pipeline
from testbed.probes import load as load_probe
from testbed.probes.base import ProbeContext, ProbeOutcome
from testbed.results.verdict import Status, Verdict
from tests.cli.test_exit_codes import CAMPAIGN, Hands, _scale_dir

#: what each scripted treatment measured (higher is better: compared, never a regression)
MEASURED = {"throughput": {"output_tokens_per_s": 100.0}}


def run(
    folder: Path, monkeypatch: pytest.MonkeyPatch, statuses: dict[str, Status], text: str = CAMPAIGN
) -> Path:
    """A ``testbed run`` whose load treatment on deployment NAME ends ``statuses[NAME]``
    (measuring :data:`MEASURED` unless SKIPPED); its run directory."""

    async def decides(ctx: ProbeContext) -> ProbeOutcome:
        name = ctx.deployment["name"]
        status = statuses[name]
        summary = {} if status is Status.SKIPPED else MEASURED
        return ProbeOutcome(summary, Verdict(status=status, reason=f"scripted for {name}"))

    monkeypatch.setattr(load_probe, "run", decides)
    monkeypatch.setattr(pipeline, "make_backend", lambda loaded, run_dir: Hands())
    folder.mkdir()
    (folder / "c.yaml").write_text(text)
    out = ["--out", str(folder / "run"), "--index", f"sqlite:///{folder}/i.db"]
    main(["run", str(folder / "c.yaml"), *out])
    return folder / "run"


def compare(base: Path, candidate: Path, tmp_path: Path) -> tuple[int, dict[str, object]]:
    document = tmp_path / "compare.json"
    code = main(["compare", str(base), str(candidate), "--no-index", "--force",
                 "--json", str(document)])  # fmt: skip
    return code, json.loads(document.read_text())


def test_every_pair_skipped_on_a_side_compared_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    base = run(tmp_path / "b", monkeypatch, {"one": Status.PASS, "two": Status.PASS})
    skipped = {"one": Status.SKIPPED, "two": Status.SKIPPED}
    candidate = run(tmp_path / "c", monkeypatch, skipped)
    capsys.readouterr()
    code, document = compare(base, candidate, tmp_path)
    assert code == EXIT_NOTHING_TESTED
    out = " ".join(capsys.readouterr().out.split())
    assert "nothing was compared: every pair (2) was skipped on a side; first:" in out
    assert "SKIPPED in the candidate: scripted for one" in out
    assert "no regression" not in out
    assert document["status"] == "SKIPPED"
    assert len(document["skipped"]) == 2  # type: ignore[arg-type]


def test_a_skipped_pair_beside_compared_ones_is_shown_and_exits_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    base = run(tmp_path / "b", monkeypatch, {"one": Status.PASS, "two": Status.PASS})
    candidate = run(tmp_path / "c", monkeypatch, {"one": Status.PASS, "two": Status.SKIPPED})
    capsys.readouterr()
    code, document = compare(base, candidate, tmp_path)
    assert code == EXIT_OK
    out = " ".join(capsys.readouterr().out.split())
    assert "not compared: 002__" in out
    assert "SKIPPED in the candidate: scripted for two" in out
    assert "no regression" in out
    assert "1 pair(s) skipped" in out
    assert document["status"] == "PASS"
    assert document["nothing_compared"] is None
    assert len(document["skipped"]) == 1  # type: ignore[arg-type]


def test_runs_with_no_treatment_in_common_compared_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    base = run(tmp_path / "b", monkeypatch, {"one": Status.PASS, "two": Status.PASS})
    other = CAMPAIGN.replace("name: one", "name: three").replace("name: two", "name: four")
    statuses = {"three": Status.PASS, "four": Status.PASS}
    candidate = run(tmp_path / "c", monkeypatch, statuses, other)
    capsys.readouterr()
    code, _ = compare(base, candidate, tmp_path)
    assert code == EXIT_NOTHING_TESTED
    out = " ".join(capsys.readouterr().out.split())
    assert "nothing was compared: no treatment of the candidate pairs with the base's" in out


def test_two_treatments_one_skipped_compared_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = run(tmp_path / "r", monkeypatch, {"one": Status.PASS, "two": Status.SKIPPED})
    first, second = sorted(p for p in folder.iterdir() if (p / "summary.json").is_file())
    capsys.readouterr()
    assert main(["compare", str(first), str(second), "--no-index"]) == EXIT_NOTHING_TESTED
    out = " ".join(capsys.readouterr().out.split())
    assert "nothing was compared: every pair (1) was skipped on a side" in out


def test_scale_plot_whose_thresholds_found_no_workload_tested_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One workload, created but never scheduled: ``scheduled→running`` has nothing to
    measure (INCONCLUSIVE, was exit 0); ``created→scheduled`` has (not 5)."""
    _scale_dir(tmp_path / "s", workloads=1)
    plot = ["scale", "plot", "-o", str(tmp_path / "s"), "--threshold"]
    assert main([*plot, "p50 scheduled→running < 1 s"]) == EXIT_NOTHING_TESTED
    out = capsys.readouterr().out
    assert "no workload reached scheduled" in out
    assert "nothing was tested: no workload reached the start of any threshold" in out
    assert main([*plot, "p50 created→scheduled < 1 h"]) != EXIT_NOTHING_TESTED
    assert "nothing was tested" not in capsys.readouterr().out
