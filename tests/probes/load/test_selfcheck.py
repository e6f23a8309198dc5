"""The harness self-check: lag, rate shortfall and CPU saturation make a run INCONCLUSIVE."""

from __future__ import annotations

import pytest

from testbed.config.load import LoadProbe, SelfCheck
from testbed.probes.load import selfcheck
from testbed.probes.load.runner import StageRun
from testbed.probes.load.selfcheck import check
from testbed.probes.load.summary import verdict_of
from testbed.results.metrics import Window
from testbed.results.verdict import Status
from tests.verdicts import assert_passed

S = 1_000_000_000


def stage(**kw: object) -> StageRun:
    base = {"name": "s", "t_start_ns": 0, "t_stop_ns": 10 * S, "cpu_s": 1.0, "wall_s": 10.0}
    return StageRun(**{**base, **kw})  # type: ignore[arg-type]


def sends(rate: float) -> list[dict[str, int]]:
    n = int(rate * 10)
    return [{"sent_ns": int(i * 10 * S / n), "done_ns": int(i * 10 * S / n) + 1} for i in range(n)]


def test_healthy_run_passes() -> None:
    result = check(
        stage(lags_ns=[100_000] * 100, requested_rate=50.0),
        sends(50),
        Window(0, 10 * S),
        SelfCheck(),
    )
    assert result.ok
    assert result.harness["achieved_rate"] == pytest.approx(50.0)
    assert result.harness["cpu_ms_per_request"] == pytest.approx(2.0)
    assert result.harness["schedule_lag_ms"] == pytest.approx({"p50": 0.1, "p99": 0.1})


def test_lag_shortfall_and_cpu_are_problems() -> None:
    run = stage(lags_ns=[20_000_000] * 10, requested_rate=100.0, cpu_fraction_max=0.97)
    result = check(run, sends(50), Window(0, 10 * S), SelfCheck())
    text = " ".join(result.problems)
    assert "schedule lag p99 20.00 ms" in text
    assert "achieved rate 50.00/s is 50.0%" in text
    assert "97% of a core" in text


def test_late_sends_say_whether_the_generator_or_the_machine_was_the_limit() -> None:
    late = [20_000_000] * 10
    busy = check(
        stage(lags_ns=late, cpu_fraction_max=0.9), sends(50), Window(0, 10 * S), SelfCheck()
    )
    assert "raise `processes`" in busy.problems[0]
    starved = check(
        stage(lags_ns=late, cpu_fraction_max=0.17, load_average=14.0),
        sends(50),
        Window(0, 10 * S),
        SelfCheck(),
    )
    assert "on a CPU only 17% of the time" in starved.problems[0]
    assert "load average 14.0" in starved.problems[0]
    assert "raise `processes`" not in starved.problems[0]


def test_a_generator_without_its_compiled_reads_says_so_when_it_was_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = stage(lags_ns=[20_000_000] * 10, cpu_fraction_max=0.97)
    assert "compiled read path" not in " ".join(check(run, [], Window(0, S), SelfCheck()).problems)
    monkeypatch.setattr(selfcheck, "compiled", None)  # as where pip found no C compiler
    problems = check(run, [], Window(0, S), SelfCheck()).problems
    assert len(problems) == 2
    assert all("installed without its compiled read path" in p for p in problems)


def test_waiting_for_slots_is_the_servers_doing() -> None:
    run = stage(requested_rate=100.0, capped=40)
    result = check(run, sends(50), Window(0, 10 * S), SelfCheck())
    assert result.ok
    assert "max_in_flight" in result.notes[0]


def _overloaded_stage(error_by: str) -> dict[str, object]:
    """A stage of 40 requests, half failed (by the server or by the client), whose harness
    self-check found its own CPU saturated."""
    failed = 20
    return {
        "stage": "c4",
        "selfcheck": {"problems": ["a load process used 97% of a core"]},
        "requests": {
            "total": 40,
            "ok": 40 - failed,
            "errors": failed,
            "server_errors": failed if error_by == "server" else 0,
            "in_window": 20,
            "top_errors": {"HTTP 500: fault" if error_by == "server" else "timeout": failed},
        },
        "slo_violations": ["success ratio 0.5000 < 0.9"],
    }


@pytest.mark.parametrize(
    ("error_by", "status"), [("server", Status.FAIL), ("client", Status.INCONCLUSIVE)]
)
def test_an_overloaded_harness_cannot_excuse_the_servers_errors(
    error_by: str, status: Status
) -> None:
    """Errors the server answered miss min_success_ratio whatever the harness did (FAIL);
    timeouts might be the harness's own queueing (INCONCLUSIVE)."""
    config = LoadProbe.model_validate({"requests": 40, "slo": {"min_success_ratio": 0.9}})
    verdict = verdict_of([_overloaded_stage(error_by)], config)
    assert verdict.status == status, verdict.reason
    expected = "success ratio 0.5000 < 0.9" if error_by == "server" else "97% of a core"
    assert expected in verdict.reason


def test_tests_read_a_harness_doubt_as_the_verdict_words_it() -> None:
    """tests/verdicts.py accepts INCONCLUSIVE for the self-check alone: it must recognise the
    reason verdict_of gives, and nothing else."""
    stage = _overloaded_stage("server")
    stage["requests"] = {"total": 40, "ok": 40, "errors": 0, "server_errors": 0,
                         "in_window": 40, "top_errors": {}}  # fmt: skip
    stage["slo_violations"] = []
    summary = {**stage, "verdict": verdict_of([stage], LoadProbe()).model_dump(mode="json")}
    assert summary["verdict"]["status"] == "INCONCLUSIVE"
    assert_passed(summary)
    summary["verdict"]["reason"] += "; c4: something else"
    with pytest.raises(AssertionError):
        assert_passed(summary)
