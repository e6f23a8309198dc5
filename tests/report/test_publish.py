"""Publishing a run directory: summary.json (versioned, with run metadata), junit.xml,
report.html (self-contained), the terminal summary, the index record, the exit code."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from rich.console import Console

from testbed.report.correctness_html import text_divergence
from testbed.report.run_summary import PublishOptions, finish_run, publish
from testbed.results.index import ResultsIndex
from testbed.results.rundir import RunDir
from tests.report.fake_runs import make_run


@pytest.fixture
def console() -> Console:
    return Console(record=True, width=200, force_terminal=False)


def test_publish_writes_everything(tmp_path: Path, console: Console) -> None:
    run = make_run(tmp_path, "r1", extras=True)
    url = f"sqlite:///{tmp_path / 'idx.sqlite'}"
    code = publish(run, console, PublishOptions(index_url=url))
    assert code == 1  # the correctness treatment FAILed
    summary = json.loads((run / "summary.json").read_text())
    assert summary["schema_version"] == 1
    assert summary["status"] == "FAIL"
    assert summary["campaign_hash"] == "c0ffee"
    assert summary["testbed_version"] == "0.1.0"
    assert summary["machine"]["hostname"] == "box"
    assert summary["servers"] == [
        {
            "worker": "w1",
            "deployment": "sim",
            "server": "sim",
            "version": "1.0",
            "argv": ["sim", "--port", "1"],
        }
    ]
    assert summary["counts"] == {"PASS": 2, "FAIL": 1, "INCONCLUSIVE": 1}
    load = summary["treatments"][0]
    assert load["metrics"]["ttft_ms.p99"] > load["metrics"]["ttft_ms.p50"] > 0
    assert "window.start_ns" not in load["metrics"]
    text = console.export_text()
    assert "run FAIL" in text
    assert "TTFT99" in text
    assert "001__sim-c1" in text
    assert "TTFT50" in text
    with ResultsIndex(url) as index:
        assert [r.run_id for r in index.runs()] == ["r1"]
        assert len(index.history("ttft_ms.p99", config_hash=load["id"])) == 1


def test_junit(tmp_path: Path, console: Console) -> None:
    run = make_run(tmp_path, "r1", extras=True)
    publish(run, console, PublishOptions(use_index=False))
    root = ET.parse(run / "junit.xml").getroot()
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == (
        "4",
        "1",
        "0",
        "1",
    )
    cases = {c.get("name"): c for c in root.iter("testcase")}
    failed = cases["003__sim-cases__corr000001"]
    failure = failed.find("failure")
    assert failure is not None
    assert "capital/openai" in (failure.get("message") or "")
    skipped = cases["004__stable-vs-canary__abab000001"].find("skipped")
    assert skipped is not None
    assert (skipped.get("message") or "").startswith("INCONCLUSIVE")
    out = cases["001__sim-c1__t0001aaaa"].find("system-out")
    assert out is not None
    assert "ttft_ms.p99 = " in (out.text or "")
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["run_id"] == "r1"


def test_html_is_self_contained_and_complete(
    tmp_path: Path, console: Console, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SECRET_TOKEN", "tok-should-never-appear")
    run = make_run(tmp_path, "r1", levels=(1, 2, 4), extras=True)
    publish(run, console, PublishOptions(use_index=False))
    page = (run / "report.html").read_text()
    for section in (
        "verdicts",
        "correctness",
        "load",
        "ab",
        "treatments",
        "plan",
        "campaign",
        "run",
    ):
        assert f'<section id="{section}">' in page
    assert page.count("<svg") == 1 + 1 + 3  # CDFs, across levels, one time series each
    assert "<script" not in page
    assert not re.search(r'(src|href)="(https?:)?//', page)  # nothing fetched
    assert "tok-should-never-appear" not in page
    assert "${env:SECRET_TOKEN}" not in page
    assert "***" in page
    # the first divergence highlighted on both sides
    assert '<mark class="expected"> Paris</mark>' in page
    assert '<mark class="actual"> Lyon</mark>' in page
    assert "abc&lt;def&gt;" in page  # escaped
    # a skip_check case is listed as unchecked, apart from the passed ones
    assert "<p>unchecked:</p><ul><li><code>free/openai</code>: answer not compared" in page
    assert "by a newer probe" in page
    assert "deeper" in page
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids)), "element ids must be unique across inline SVGs"


def test_finish_run_defaults_to_index_beside_runs(
    tmp_path: Path, console: Console, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TESTBED_INDEX_URL", raising=False)
    run = make_run(tmp_path, "r1")
    assert finish_run(RunDir(run), console) == 0
    assert (tmp_path / "index.sqlite").is_file()
    assert (run / "report.html").is_file()
    assert (run / "junit.xml").is_file()


def test_broken_index_is_a_warning(tmp_path: Path, console: Console) -> None:
    run = make_run(tmp_path, "r1")
    (tmp_path / "blocked").write_text("a file where a folder should be")
    code = publish(
        run, console, PublishOptions(index_url=f"sqlite:///{tmp_path}/blocked/x/i.sqlite")
    )
    assert code == 0
    assert "not recorded in the index" in console.export_text()


def test_text_divergence() -> None:
    d = text_divergence("hello world", "hello there")
    assert d["index"] == 6
    assert d["expected_token"] == "w"
    assert d["actual_token"] == "t"
    d = text_divergence("abc", "abcd")
    assert d["index"] == 3
    assert d["expected_token"] is None
    assert d["actual_token"] == "d"


def test_report_command_rerenders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from testbed.cli import main

    run = make_run(tmp_path, "r1", extras=True)
    html = tmp_path / "elsewhere" / "r.html"
    assert main(["report", str(run), "--no-index", "--html", str(html)]) == 1  # a FAIL inside
    assert html.is_file()
    assert not (tmp_path / "index.sqlite").exists()
    assert "run FAIL" in capsys.readouterr().out
    assert main(["report", str(tmp_path / "nope")]) == 2
