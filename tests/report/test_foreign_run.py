"""``testbed report FILE`` and ``testbed compare`` take another harness's results (issue 36):
a guidellm sweep converted by llmd-benchmark-report is rendered as a run, and one of its
benchmarks is compared with a real ``testbed load`` folder, saying what could be compared."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from testbed.cli import main
from testbed.results.benchmark_report import GUIDELLM_ITL, NO_RECORDS
from testbed.results.index import MetricRow, ResultsIndex, RunRow
from testbed.servers.sim.child import sim_process

HARNESSES = Path(__file__).parent.parent / "fixtures" / "harnesses"
FLAGS = ["--profile", "concurrency", "--concurrency", "2", "--requests", "30", "--no-plots"]


@pytest.fixture
def guidellm(tmp_path: Path) -> Path:
    copy = tmp_path / "downloads" / "guidellm.json"
    copy.parent.mkdir()
    copy.write_text((HARNESSES / "guidellm_benchmarks.json").read_text())
    return copy


@pytest.fixture(scope="module")
def load_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("load") / "testbed"
    with sim_process("--ttft-ms", "20", "--itl-ms", "5") as url:
        assert main(["load", url, *FLAGS, "--out", str(out)]) == 0
    return out


def test_report_renders_a_guidellm_sweep_as_a_run(
    guidellm: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(guidellm)]) == 0  # INCONCLUSIVE: no verdict to fail
    html = (guidellm.parent / "guidellm.report.html").read_text()
    headline = html[html.index('id="headline"') : html.index('id="verdicts"')]
    assert "guidellm.json#0" in headline
    assert "guidellm.json#1" in headline
    assert "21.35" in headline
    assert "23.90" in headline
    assert sorted(p.name for p in guidellm.parent.iterdir()) == [
        "guidellm.json",
        "guidellm.report.html",
    ]  # nothing else written beside another tool's file, no index made
    assert "INCONCLUSIVE" in capsys.readouterr().out
    assert main(["report", str(guidellm), "--fail-on", "inconclusive"]) == 1


def test_report_records_a_results_file_only_in_a_named_index(guidellm: Path) -> None:
    url = f"sqlite:///{guidellm.parent.parent / 'team.sqlite'}"
    assert main(["report", f"{guidellm}#1", "--index", url]) == 0
    with ResultsIndex(url) as index, Session(index.engine) as session:
        runs = session.scalars(select(RunRow.campaign)).all()
        value = session.scalar(select(MetricRow.value).where(MetricRow.name == "ttft_ms.p50"))
    assert (runs, value) == (["guidellm"], 23.9)


def test_compare_a_guidellm_benchmark_with_a_testbed_run(
    guidellm: Path, load_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "compare.json"
    code = main(["compare", f"{guidellm}#0", str(load_folder), "--json", str(out)])
    found = json.loads(out.read_text())
    assert code == 0  # no records on one side: unverified, never failing
    compared = found["notes"][0]
    assert compared.startswith("comparable: ")
    assert "ttft_ms: mean, p50, p90, p95, p99" in compared
    assert "tpot_ms" in compared
    assert "throughput: output_tokens_per_s, requests_per_s" in compared
    # guidellm has no per-gap ITL: testbed's is named as not compared
    alone = next(n for n in found["notes"] if n.startswith("only in the candidate, not comparable"))
    assert "itl_ms" in alone
    assert NO_RECORDS in found["warnings"]
    assert GUIDELLM_ITL in found["warnings"]
    assert any("own client" in w for w in found["warnings"])
    ttft = next(m for m in found["metrics"] if m["metric"] == "ttft_ms.p50")
    assert ttft["base"] == 21.35  # guidellm's, read from its file through the converter
    # without records nothing is significant: a change beyond its threshold is unverified
    assert {m["outcome"] for m in found["metrics"]} <= {"unverified", "no change"}
    assert any(m["outcome"] == "unverified" for m in found["metrics"])
    printed = capsys.readouterr().out
    assert "comparable: " in printed
    assert "own client" in printed


def test_compare_asks_which_benchmark_of_a_sweep(
    guidellm: Path, load_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", str(guidellm), str(load_folder)]) == 2
    said = capsys.readouterr().err
    assert "holds 2 benchmarks" in said
    assert "guidellm.json#1 (tool guidellm" in said
