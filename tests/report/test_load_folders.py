"""``testbed load --out DIR`` folders are runs of one treatment: ``testbed report DIR`` and
``testbed compare`` take them (issue 36; they were refused, exit 2, "nothing to resume").

Real folders: ``testbed load`` against two simulators, one 30 ms slower to the first token.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from testbed.cli import main
from testbed.report.load_run import is_load_folder, load_document
from testbed.servers.sim.child import sim_process

FLAGS = ["--profile", "concurrency", "--concurrency", "2", "--requests", "40", "--no-plots"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Load folders: ``fast`` and ``again`` (the same server, twice) and ``slow``."""
    root = tmp_path_factory.mktemp("loads")
    out = {}
    with sim_process("--ttft-ms", "5", "--itl-ms", "1") as fast:
        for name in ("fast", "again"):
            out[name] = root / name
            assert main(["load", fast, *FLAGS, "--out", str(out[name])]) == 0
    with sim_process("--ttft-ms", "35", "--itl-ms", "1") as slow:
        out["slow"] = root / "slow"
        assert main(["load", slow, *FLAGS, "--out", str(out["slow"])]) == 0
    return out


def compared(base: Path, candidate: Path, tmp_path: Path, *flags: str) -> tuple[int, Any]:
    report = tmp_path / "compare.json"
    code = main(["compare", str(base), str(candidate), "--json", str(report), *flags])
    return code, json.loads(report.read_text())


@pytest.mark.slow
def test_testbed_report_renders_a_load_folder(folders: dict[str, Path], tmp_path: Path) -> None:
    folder = tmp_path / "copy"
    shutil.copytree(folders["fast"], folder)
    written = (folder / "summary.json").read_text()
    assert main(["report", str(folder), "--no-index"]) == 0
    assert (folder / "summary.json").read_text() == written  # the load's own summary, kept
    html = (folder / "report.html").read_text()
    assert "ttft_ms" in html
    assert 'tests="1"' in (folder / "junit.xml").read_text()


@pytest.mark.slow
def test_a_load_folder_records_what_report_needs(folders: dict[str, Path]) -> None:
    assert is_load_folder(folders["fast"])
    document = load_document(folders["fast"])
    run = json.loads((folders["fast"] / "summary.json").read_text())["run"]
    assert (run["params"]["concurrency"], run["params"]["requests"]) == (2, 40)
    assert document.machine["cpu_count"] == run["machine"]["cpu_count"]
    (row,) = document.treatments
    assert (row.dir, row.probe, row.status) == (".", "load", "PASS")
    assert row.deployments[0].startswith("http://127.0.0.1:")
    assert row.metrics["ttft_ms.p50"] > 0
    assert not any(name.startswith("run.") for name in row.metrics)


@pytest.mark.slow
def test_compare_pairs_two_load_folders(folders: dict[str, Path], tmp_path: Path) -> None:
    _, same = compared(folders["fast"], folders["again"], tmp_path)
    assert {r["treatment"] for r in same["metrics"]} == {"again"}  # named by its folder
    assert {r["metric"] for r in same["metrics"]} >= {"ttft_ms.p50", "e2e_ms.p99"}
    code, slower = compared(folders["fast"], folders["slow"], tmp_path)
    assert code == 1
    regressed = {r["metric"] for r in slower["metrics"] if r["outcome"] == "regression"}
    assert "ttft_ms.p50" in regressed


@pytest.mark.slow
def test_a_load_folder_is_not_compared_with_a_whole_run(
    folders: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text("{}")
    assert main(["compare", str(folders["fast"]), str(run)]) == 2
    assert "one treatment" in capsys.readouterr().err


def test_a_folder_without_records_is_no_load_folder(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_text(json.dumps({"profile": "rate", "verdict": {}}))
    assert not is_load_folder(tmp_path)
    (tmp_path / "records.jsonl").write_text("")
    assert is_load_folder(tmp_path)
    (tmp_path / "run.json").write_text("{}")
    assert not is_load_folder(tmp_path)
