"""Long work says how far along it is (issue 36): a load test's stage k of n, requests done of
requested and time left; ``testbed run``'s treatments done of planned with time spent and
left. Clocks are injected: nothing here sleeps."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from testbed.cli import main
from testbed.config.load import LoadProbe
from testbed.config.sim import SimParams
from testbed.plan.model import Treatment
from testbed.probes.load.progress import StageProgress, stage_count
from testbed.probes.load.runner import Stage
from testbed.report.live import LiveDisplay, ProgressLines, Throttle, eta
from testbed.results.verdict import Status, Verdict
from testbed.servers.sim import serve_in_thread

S = 1_000_000_000


class Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def test_a_count_bound_stage_says_requests_done_of_asked_and_time_left() -> None:
    stage = Stage("rate-5", duration_s=None, max_requests=100)
    where = StageProgress(stage, 2, 7, started_ns=0)
    assert where.line(0, 0) == "load: stage 2 of 7 (rate-5): 0 of 100 requests, 0s in"
    # 30 requests in 10 s: 70 left at 3/s
    assert where.line(30, 10 * S) == (
        "load: stage 2 of 7 (rate-5): 30 of 100 requests, 10s in, ~23s left"
    )
    assert where.line(100, 34 * S, ended=True).endswith("100 of 100 requests, done in 34s")


def test_a_duration_bound_stage_says_the_time_it_has_left() -> None:
    where = StageProgress(Stage("c-4", duration_s=600.0), 1, 1, started_ns=0)
    assert (
        where.line(1234, 95 * S) == "load: stage 1 of 1 (c-4): 1234 requests, 1m35s in, ~8m25s left"
    )
    both = StageProgress(Stage("c-4", duration_s=600.0, max_requests=100), 1, 1, started_ns=0)
    assert both.left_s(50, 10 * S) == pytest.approx(10.0)  # the count ends it first


def test_a_sweep_counts_all_its_stages() -> None:
    assert stage_count(LoadProbe.model_validate({"profile": "sweep", "sweep": {"rates": 5}})) == 7
    assert stage_count(LoadProbe.model_validate({"profile": "rate", "rate": 3})) == 1


def test_a_log_gets_a_line_per_stage_and_then_one_per_interval() -> None:
    clock = Clock()
    throttle = Throttle(30.0, clock)
    assert throttle.due("t", "load: stage 1 of 3 (a): 0 of 9 requests, 0s in")
    clock.now = 10 * S
    assert not throttle.due("t", "load: stage 1 of 3 (a): 3 of 9 requests, 10s in")
    assert throttle.due("t", "load: stage 1 of 3 (a): 9 of 9 requests, done in 10s")
    assert throttle.due("t", "load: stage 2 of 3 (b): 0 of 9 requests, 0s in")
    clock.now = 41 * S
    assert throttle.due("t", "load: stage 2 of 3 (b): 5 of 9 requests, 31s in")


def test_progress_lines_on_a_terminal_rewrite_one_line() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Tty()
    lines = ProgressLines(out)
    lines("load: stage 1 of 1 (x): 0 of 4 requests, 0s in")
    lines("load: stage 1 of 1 (x): 4 of 4 requests, done in 1s")
    assert out.getvalue() == (
        "\rload: stage 1 of 1 (x): 0 of 4 requests, 0s in\x1b[K"
        "\rload: stage 1 of 1 (x): 4 of 4 requests, done in 1s\x1b[K\n"
    )


def test_the_run_display_says_treatments_done_time_spent_and_left() -> None:
    assert eta(3, 10, 90.0) == "3/10 · 1m30s spent · ~3m30s left"
    assert eta(10, 10, 90.0) == "10/10 · 1m30s spent"
    clock = Clock()
    out = io.StringIO()
    display = LiveDisplay(Console(file=out, width=200), total=4, clock=clock)
    treatment = Treatment(1, "t1", "a", "load", ("w",), "load", {})
    with display:
        display.started(treatment, 1)
        clock.now = 60 * S
        display.progress(treatment, "load: stage 1 of 1 (c): 5 of 10 requests, 60s in")
        display.finished(treatment, Verdict(status=Status.PASS, reason="ok"))
    text = out.getvalue()
    assert "001__a__t1: load: stage 1 of 1 (c): 5 of 10 requests" in text
    assert "[1/4 · 1m00s spent · ~3m00s left] 001__a__t1" in text


def test_testbed_load_reports_its_stage_and_requests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = ["--concurrency", "2", "--requests", "8", "--no-plots", "--out", str(tmp_path / "l")]
    with serve_in_thread(SimParams()) as url:
        assert main(["load", url, *flags]) == 0
    err = capsys.readouterr().err
    assert "load: stage 1 of 1 (concurrency-2): 0 of 8 requests" in err
    assert "load: stage 1 of 1 (concurrency-2): 8 of 8 requests, done in" in err
