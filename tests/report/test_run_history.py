"""``testbed run`` against the results index's history (issue 36): it records its run with
its ``--label`` and commit, and names the change points of its configurations — on the
terminal, in report.html's History section and in summary.json.

Real runs of the simulator (TTFT 30 ms) into a runs folder whose index is filled with 24
synthetic earlier runs of the same configuration: TTFT p50 at 20 ms, then 30 ms from run 13.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from testbed.cli import main
from testbed.results.index import ResultsIndex, RunEntry, TreatmentEntry
from testbed.results.provenance import provenance

CAMPAIGN = """\
name: nightly
deployments:
  - name: one
    server: sim
    params: {ttft_ms: 30, itl_ms: 1, seed: 1}
load:
  profile: concurrency
  concurrency: 1
  requests: 12
  plots: false
"""


def synthetic(url: str, row: dict[str, Any], values: list[float]) -> None:
    """Earlier runs of ``row``'s configuration, one TTFT p50 each, labelled and committed."""
    with ResultsIndex(url) as index:
        for n, value in enumerate(values, start=1):
            treatment = TreatmentEntry(
                id=row["id"], dir=row["dir"], probe="load", params_key=row["params_key"],
                params=row["params"], status="PASS", metrics={"ttft_ms.p50": value},
            )  # fmt: skip
            index.add_run(
                RunEntry(
                    run_id=f"run-{n:02d}", campaign="nightly", campaign_hash="c0ffee",
                    started=f"2020-01-{n:02d}T00:00:00Z", status="PASS", testbed_version="0.1",
                    hostname="box", meta={"label": f"nightly {n}", "commit": f"c{n:02d}"},
                    treatments=[treatment],
                )
            )  # fmt: skip


def run(campaign: Path, out: Path, *flags: str) -> int:
    return main(["run", str(campaign), "--out", str(out), *flags])


@pytest.mark.slow
def test_a_run_names_the_change_point_its_configuration_carries(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    campaign, runs = tmp_path / "c.yaml", tmp_path / "runs"
    campaign.write_text(CAMPAIGN)
    assert run(campaign, runs / "first") == 0
    (row,) = json.loads((runs / "first" / "summary.json").read_text())["treatments"]
    capsys.readouterr()
    rng = np.random.default_rng(5)
    values = [(20.0 if n <= 12 else 30.0) * (1 + rng.normal(0, 0.02)) for n in range(1, 25)]
    url = f"sqlite:///{runs / 'index.sqlite'}"
    synthetic(url, row, values)

    assert run(campaign, runs / "second", "--label", "after the change", "--commit", "abc123") == 0
    printed = " ".join(capsys.readouterr().out.split())  # the terminal folds long lines
    assert "history: 1 change point(s) in this run's configurations" in printed
    line = printed[printed.index("ttft_ms.p50: +") :]
    assert "at run 13 of 26, between run-12 (nightly 12, commit c12) and run-13" in line
    assert "— this run carries it" in line  # the newest run is still 50 % slower

    summary = json.loads((runs / "second" / "summary.json").read_text())
    (series,) = summary["history"]["series"]
    assert (series["metric"], series["regression"]) == ("ttft_ms.p50", True)
    assert [c["run"] for c in series["change_points"]] == [13]
    newest = series["runs"][-1]
    assert (newest["run_id"], newest["label"], newest["commit"]) == (
        "second", "after the change", "abc123",
    )  # fmt: skip
    page = (runs / "second" / "report.html").read_text()
    history = page[page.index('<section id="history">') :]
    history = history[: history.index("</section>")]
    assert history.count("<svg") == 1
    assert "commit <code>c13</code>" in history

    # recorded with the run: testbed history names it at the change point's side
    out = tmp_path / "history.json"
    assert (
        main(["history", "--index", url, "--json", str(out), "--html", str(tmp_path / "h.html")])
        == 1
    )
    found = next(s for s in json.loads(out.read_text())["series"] if s["metric"] == "ttft_ms.p50")
    assert found["runs"][-1]["commit"] == "abc123"


@pytest.mark.slow
def test_history_without_a_change_says_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    campaign, runs = tmp_path / "c.yaml", tmp_path / "runs"
    campaign.write_text(CAMPAIGN)
    assert run(campaign, runs / "first") == 0
    (row,) = json.loads((runs / "first" / "summary.json").read_text())["treatments"]
    rng = np.random.default_rng(3)
    level = row["metrics"]["ttft_ms.p50"]
    values = [level * (1 + rng.normal(0, 0.02)) for _ in range(20)]
    synthetic(f"sqlite:///{runs / 'index.sqlite'}", row, values)
    capsys.readouterr()
    assert run(campaign, runs / "second") == 0
    assert "history:" not in capsys.readouterr().out
    assert "history" not in json.loads((runs / "second" / "summary.json").read_text())
    assert '<section id="history">' not in (runs / "second" / "report.html").read_text()


def test_the_commit_is_the_flag_then_cis_variable_then_git(tmp_path: Path) -> None:
    assert provenance(tmp_path, environ={}) == {}  # no repository, no variable: absent
    assert provenance(tmp_path, "x", environ={"GIT_COMMIT": "e1"}) == {"label": "x", "commit": "e1"}
    assert provenance(tmp_path, commit="f1", environ={"GITHUB_SHA": "e1"})["commit"] == "f1"
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp_path / "c.yaml").write_text("name: a\n")
    subprocess.run([*git, "add", "c.yaml"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "one"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    assert provenance(tmp_path, environ={}) == {"commit": head.stdout.strip(), "dirty": False}
    (tmp_path / "c.yaml").write_text("name: b\n")  # the run did not test the commit exactly
    assert provenance(tmp_path, environ={})["dirty"] is True
