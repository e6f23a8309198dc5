"""Criteria between treatments of one run (``report/criteria.py``): judged on the bootstrap
interval of the change against the margin, in the run's status and in its report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from testbed.config.loader import load_campaign_text
from testbed.core.errors import InputError
from testbed.report.console import print_summary
from testbed.report.html import render
from testbed.report.run_summary import run_document
from testbed.results.rundir import RunDir
from tests.report.fake_runs import make_run

FACTOR = "load.concurrency"


def with_criteria(path: Path, *criteria: dict[str, Any]) -> Path:
    resolved = path / "campaign.resolved.yaml"
    document = yaml.safe_load(resolved.read_text())
    document["criteria"] = list(criteria)
    resolved.write_text(yaml.safe_dump(document))
    return path


def criterion(baseline: int, candidates: list[int], better_by: str = "10%") -> dict[str, Any]:
    return {
        "name": "fewer in flight is faster",
        "metric": "ttft_ms.p90",
        "baseline": {FACTOR: baseline},
        "candidates": [{FACTOR: c} for c in candidates],
        "better_by": better_by,
    }


def test_candidates_that_beat_the_baseline_by_the_margin_pass(tmp_path: Path) -> None:
    # TTFT scales with 1 + 0.1 x concurrency: 22 ms (1), 28 ms (4), 36 ms (8), 400 requests each.
    run = make_run(tmp_path, "r", levels=(1, 4, 8), n=400)
    document = run_document(RunDir.existing(with_criteria(run, criterion(8, [1, 4]))))
    judged = document.criteria[0]
    assert judged["status"] == "PASS"
    first = judged["comparisons"][0]
    assert first["interval"][1] < -0.10  # the whole interval is beyond the margin
    assert first["change"] == pytest.approx(first["candidate_value"] / first["base_value"] - 1)
    assert "ttft_ms.p90 change" in first["reason"]
    assert document.status == "PASS"


def test_a_worse_candidate_fails_and_fails_the_run(tmp_path: Path) -> None:
    run = make_run(tmp_path, "r", levels=(1, 8), n=400)
    document = run_document(RunDir.existing(with_criteria(run, criterion(1, [8]))))
    assert document.criteria[0]["status"] == "FAIL"
    assert document.status == "FAIL"
    console = Console(record=True, width=200)
    print_summary(document, console)
    text = console.export_text()
    assert "Criteria" in text
    assert "concurrency=8 vs concurrency=1" in text
    assert 'id="criteria"' in render(run, document)
    from testbed.report.junit import render as junit

    xml = junit(document)
    assert 'name="demo.criteria" tests="1" failures="1"' in xml
    assert "ttft_ms.p90: 002__sim-c8" in xml


def test_a_margin_inside_the_interval_is_inconclusive_and_few_requests_say_so(
    tmp_path: Path,
) -> None:
    run = make_run(tmp_path, "r", levels=(4, 8), n=400)
    # 28 vs 36 ms: about -22 %; a 22 % margin sits inside the interval.
    document = run_document(RunDir.existing(with_criteria(run, criterion(8, [4], "22%"))))
    assert document.criteria[0]["status"] == "INCONCLUSIVE"
    small = make_run(tmp_path, "s", levels=(4, 8), n=30)
    p99 = {**criterion(8, [4]), "metric": "ttft_ms.p99"}
    document = run_document(RunDir.existing(with_criteria(small, p99)))
    assert "too few requests for p99" in document.criteria[0]["comparisons"][0]["reason"]


CAMPAIGN = """
name: c
deployments: [{name: sim, server: sim}]
matrix: {factors: {load.concurrency: [1, 4]}}
load: {requests: 10}
criteria:
  - name: x
    metric: ttft_ms.p90
    baseline: {%s: 4}
    candidates: [{load.concurrency: %s}]
"""


@pytest.mark.parametrize(
    ("key", "level", "message"),
    [
        ("load.rate", "1", "'load.rate' is not a matrix factor"),
        ("load.concurrency", "2", "2 is not one of its levels"),
    ],
)
def test_criteria_that_choose_nothing_are_refused_at_validation(
    key: str, level: str, message: str
) -> None:
    with pytest.raises(InputError, match=message):
        load_campaign_text(CAMPAIGN % (key, level), "c.yaml")


def test_compare_of_two_treatments_says_which_is_better(tmp_path: Path) -> None:
    from testbed.report.compare import CompareOptions, compare_runs
    from testbed.report.compare_view import which_is_better

    run = make_run(tmp_path, "r", levels=(1, 8), n=400)
    slow, fast = sorted(p for p in run.iterdir() if p.is_dir())[::-1]  # 002 (c8), 001 (c1)
    latency = CompareOptions(metrics=["ttft_ms.*"])  # c1 has less throughput: only TTFT here
    comparison = compare_runs(slow, fast, latency)
    assert comparison.treatments
    assert {r.metric for r in comparison.improvements} >= {"ttft_ms.p90", "ttft_ms.p50"}
    assert not comparison.regressions
    line = which_is_better(comparison)
    assert line.startswith(f"better: {fast.name} (candidate) beats {slow.name}")
    assert "ttft_ms.p90 -" in line
    reverse = compare_runs(fast, slow, latency)
    assert reverse.failed  # the slower picker as candidate is a regression: exit 1
    assert which_is_better(reverse).startswith(f"better: {fast.name} (base)")
    mixed = which_is_better(compare_runs(slow, fast, CompareOptions()))
    assert mixed.startswith(f"mixed: {fast.name} is better on")
    assert "throughput.requests_per_s" in mixed.split("worse on")[1]
