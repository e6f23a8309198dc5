"""``testbed load`` against the built-in simulator: ``--requests N`` records exactly N, a
``--duration`` that ends the stage first says how many of how many ran, and an output
folder is never shared by two runs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed.cli import main
from testbed.core import clock
from testbed.results.files import read_records
from testbed.servers.sim.child import sim_process

FLAGS = ("--output-tokens", "2", "--input-tokens", "4", "--no-plots")


@pytest.fixture(scope="module")
def slow_sim() -> Iterator[str]:
    """Half a second to a first token: 21 rounds of two requests take 11 s."""
    with sim_process("--ttft-ms", "520", "--itl-ms", "1") as url:
        yield url


@pytest.fixture(scope="module")
def sim() -> Iterator[str]:
    with sim_process("--ttft-ms", "5", "--itl-ms", "1") as url:
        yield url


def load(url: str, *flags: str) -> int:
    return main(["load", url, *FLAGS, *flags])


def summary_of(out: Path) -> dict[str, Any]:
    return dict(json.loads((out / "summary.json").read_text()))


def test_requests_past_the_default_duration_all_run(slow_sim: str, tmp_path: Path) -> None:
    """42 requests two at a time take 10.9 s: past the 10 s a stage runs when it has no
    count, so a count taken for a hint would stop at 40."""
    out = tmp_path / "out"
    code = load(slow_sim, "--concurrency", "2", "--requests", "42", "--out", str(out))
    assert code == 0
    assert len(read_records(out / "records.jsonl")) == 42
    summary = summary_of(out)
    assert (summary["requests"]["asked"], summary["requests"]["total"]) == (42, 42)
    assert summary["cut_short"] is None


def test_a_duration_that_ends_the_stage_first_is_said(
    sim: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    flags = ("--concurrency", "1", "--requests", "1000", "--duration", "0.3")
    assert load(sim, *flags, "--out", str(out)) == 0  # INCONCLUSIVE exits 0 by default
    ran = len(read_records(out / "records.jsonl"))
    assert 0 < ran < 1000
    said = f"{ran} of 1000 requests ran: duration_s (0.3 s) ended the stage first"
    terminal = " ".join(capsys.readouterr().out.split())  # rich wraps long lines
    assert "verdict: INCONCLUSIVE" in terminal
    assert said in terminal
    summary = summary_of(out)
    assert summary["cut_short"].startswith(said)
    assert summary["verdict"]["status"] == "INCONCLUSIVE"
    assert said in summary["verdict"]["reason"]
    # --fail-on inconclusive turns it into exit 1, like any INCONCLUSIVE
    again = tmp_path / "again"
    assert load(sim, *flags, "--out", str(again), "--fail-on", "inconclusive") == 1


def test_a_used_output_folder_is_refused(
    sim: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Records are appended: a second run into the folder would be judged with the first's."""
    out = tmp_path / "out"
    assert load(sim, "--requests", "3", "--out", str(out)) == 0
    capsys.readouterr()
    assert load(sim, "--requests", "5", "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert f"--out {out}: the folder already holds files (" in err
    assert "records.jsonl" in err  # among the first few it names
    assert "name a new or empty folder, or remove this one first" in err
    assert len(read_records(out / "records.jsonl")) == 3  # the first run's, untouched
    assert summary_of(out)["requests"]["total"] == 3
    empty = tmp_path / "empty"
    empty.mkdir()
    assert load(sim, "--requests", "2", "--out", str(empty)) == 0  # an empty folder is fine
    assert len(read_records(empty / "records.jsonl")) == 2


def test_default_folders_of_runs_in_one_second_differ(
    sim: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(clock, "run_stamp", lambda: "20260101-000000")
    assert load(sim, "--requests", "3") == 0
    assert load(sim, "--requests", "2") == 0
    first, second = Path("runs/load-20260101-000000"), Path("runs/load-20260101-000000-2")
    assert len(read_records(first / "records.jsonl")) == 3
    assert len(read_records(second / "records.jsonl")) == 2


@pytest.mark.slow
def test_report_html_of_a_cut_short_load_says_how_many_ran(sim: str, tmp_path: Path) -> None:
    """``testbed report`` of the folder: the Load section flags the stage, and the verdict's
    reason says it too."""
    out = tmp_path / "out"
    flags = ("--concurrency", "1", "--requests", "1000", "--duration", "0.3")
    assert load(sim, *flags, "--out", str(out)) == 0
    ran = summary_of(out)["requests"]["total"]
    assert main(["report", str(out), "--no-index"]) == 0
    html = (out / "report.html").read_text()
    said = f"{ran} of 1000 requests ran: duration_s (0.3 s) ended the stage first"
    assert f'<p class="flag">⚠ concurrency-1: {said}' in html
    assert html.count(said) >= 2  # the flag, and the verdict's reason
