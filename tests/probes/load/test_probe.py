"""The load probe end to end against the simulator (a child process).

A test that judges a verdict runs against a paced simulator (against an instant one the
generator itself is the bottleneck, which its self-check rightly calls INCONCLUSIVE) and
through ``trusted``, which runs again when the machine was too busy for the harness to trust
its own numbers.
"""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from testbed.core.errors import InfrastructureError
from testbed.probes.load import run
from testbed.results.files import read_records
from testbed.results.verdict import Status

KEYS = ("p50", "p90", "p95", "p99", "p999", "mean", "std", "n")


def test_concurrency_summary_shape_and_records(sim_url: str, trusted: Any, tmp_path: Path) -> None:
    outcome, out = trusted(sim_url, tmp_path, concurrency=4, duration_s=1.0)
    s = outcome.summary
    assert outcome.verdict.status == Status.PASS, outcome.verdict.reason
    for metric in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"):
        assert set(KEYS) <= set(s[metric])
    assert set(s["throughput"]) >= {"requests_per_s", "output_tokens_per_s"}
    assert set(s["harness"]) >= {
        "schedule_lag_ms",
        "requested_rate",
        "achieved_rate",
        "cpu_ms_per_request",
    }
    assert set(s["harness"]["schedule_lag_ms"]) == {"p50", "p99"}
    records = read_records(out / "records.jsonl")
    assert len(records) == s["requests"]["total"] > 0
    first = records[0]
    assert first["sent_ns"] < first["first_byte_ns"] <= first["chunks_ns"][0] <= first["done_ns"]
    assert len(first["chunks_ns"]) == 64
    assert first["usage_output_tokens"] == first["client_output_tokens"] == 64
    assert first["input_tokens"] == first["usage_input_tokens"] == 128
    assert not any(r["token_mismatch"] for r in records)
    assert s["setup"]["model"] == "sim-model"
    assert s["setup"]["tokenizer"] == "rule:whitespace"
    assert (out / "latency_cdf.png").stat().st_size > 1000
    assert (out / "time_series.png").stat().st_size > 1000


def _accuracy_error(s: dict[str, Any]) -> float:
    return float(max(abs(s["ttft_ms"]["p50"] - 10.0), abs(s["itl_ms"]["p50"] - 2.0)))


def _accurate(s: dict[str, Any]) -> bool:
    """Every criterion the accuracy test asserts (see there)."""
    return (
        _accuracy_error(s) <= 0.5
        and 10.0 <= s["ttft_ms"]["p99"] < 10.0 + 20.0
        and 2.0 <= s["itl_ms"]["p99"] < 2.0 + 20.0
        and abs(s["harness"]["achieved_rate"] - 20) <= 2
    )


@pytest.mark.slow
def test_accuracy_against_the_simulator_ground_truth(
    sim_url: str, context: Any, self_check_problems: Any, tmp_path: Path
) -> None:
    """TTFT and ITL medians within 0.5 ms of the simulator's configured 10 ms / 2 ms, at a
    CI-safe 20 requests/s (bench/load_accuracy.py reports 200/s). Both processes share the
    machine with whatever else runs, so up to four short runs are made and the first that
    meets every criterion is judged: a burst of someone else's load is not the harness's
    error. A run the harness's own self-check distrusts is never the one judged."""
    runs, distrust = [], []
    for attempt in range(4):
        config = {"profile": "rate", "rate": 20, "duration_s": 3.0, "arrival": "constant"}
        with context(sim_url, tmp_path / str(attempt), **config) as ctx:
            outcome = asyncio.run(run(ctx))
        s = outcome.summary
        problems = self_check_problems(s, outcome.verdict.status)
        distrust += problems
        if problems:
            continue
        runs.append(s)
        if _accurate(s):
            break
    assert runs, f"the harness distrusted every run: {distrust}"
    s = next((s for s in runs if _accurate(s)), min(runs, key=_accuracy_error))
    assert s["ttft_ms"]["p50"] == pytest.approx(10.0, abs=0.5)
    assert s["itl_ms"]["p50"] == pytest.approx(2.0, abs=0.5)
    # p99s move with the machine's scheduling (another program's burst delays a wake-up by
    # milliseconds); here only a sanity bound, bench/load_accuracy.py reports the figure
    assert 10.0 <= s["ttft_ms"]["p99"] < 10.0 + 20.0
    assert 2.0 <= s["itl_ms"]["p99"] < 2.0 + 20.0
    assert s["harness"]["achieved_rate"] == pytest.approx(20, rel=0.1)


def test_rate_profile_hits_the_requested_rate(
    instant_url: str, trusted: Any, tmp_path: Path
) -> None:
    outcome, _ = trusted(instant_url, tmp_path, profile="rate", rate=100, duration_s=2.0)
    harness = outcome.summary["harness"]
    assert harness["requested_rate"] == pytest.approx(100, rel=0.15)  # Poisson, 2 s
    assert harness["achieved_rate"] == pytest.approx(harness["requested_rate"], rel=0.1)
    assert harness["precise_timer"] is True


def test_missed_slo_fails(sim_url: str, trusted: Any, tmp_path: Path) -> None:
    slo = {"ttft_p99_ms": 5.0}
    outcome, _ = trusted(sim_url, tmp_path, concurrency=2, duration_s=0.5, slo=slo)
    assert outcome.verdict.status == Status.FAIL, outcome.verdict.reason
    assert "ttft_ms p99" in outcome.verdict.reason
    assert outcome.summary["throughput"]["goodput_requests_per_s"] == 0.0


def test_sweep_runs_synchronous_saturation_and_rates(
    instant_url: str, context: Any, tmp_path: Path
) -> None:
    config = {"profile": "sweep", "duration_s": 0.4, "sweep": {"rates": 2, "max_concurrency": 8}}
    with context(instant_url, tmp_path, **config) as ctx:
        outcome = asyncio.run(run(ctx))
    names = [stage["stage"] for stage in outcome.summary["stages"]]
    assert names[:2] == ["synchronous", "saturation"]
    assert len(names) == 4
    rates = [stage["load"]["rate"] for stage in outcome.summary["stages"][2:]]
    assert rates == sorted(rates)
    assert (tmp_path / "sweep.png").exists()


def test_two_processes_merge_records_exactly(
    instant_url: str, context: Any, tmp_path: Path
) -> None:
    config = {"profile": "rate", "rate": 100, "requests": 60, "duration_s": None, "processes": 2}
    with context(instant_url, tmp_path, **config) as ctx:
        outcome = asyncio.run(run(ctx))
    records = read_records(tmp_path / "records.jsonl")
    assert len(records) == 60
    assert sorted(r["n"] for r in records) == list(range(60))
    assert {r["proc"] for r in records} == {0, 1}
    assert outcome.summary["harness"]["processes"] == 2
    assert not list(tmp_path.glob(".load-*"))  # part files merged and removed


def test_unreachable_server_is_an_infrastructure_error(context: Any, tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with (
        context(f"http://127.0.0.1:{port}", tmp_path, duration_s=0.2) as ctx,
        pytest.raises(InfrastructureError, match="unreachable"),
    ):
        asyncio.run(run(ctx))


def test_cli_load_writes_summary(sim_url: str, self_check_problems: Any, tmp_path: Path) -> None:
    from testbed.cli import main

    for attempt in range(3):  # again only while the harness distrusts its own run
        out = tmp_path / str(attempt)
        args = ["load", sim_url, "--concurrency", "2", "--requests", "20", "--output-tokens", "16"]
        code = main([*args, "--out", str(out), "--json"])
        summary = json.loads((out / "summary.json").read_text())
        if not self_check_problems(summary, summary["verdict"]["status"]):
            break
    assert summary["verdict"]["status"] == "PASS", summary["verdict"]["reason"]
    assert code == 0
    assert summary["requests"]["total"] == 20


def test_faulty_server_errors_are_recorded_and_fail(
    simulator: Any, trusted: Any, tmp_path: Path
) -> None:
    flags = ("--error-rate", "0.2", "--disconnect-rate", "0.1", "--malformed-rate", "0.1")
    config = {"concurrency": 4, "requests": 60, "dataset": {"output_tokens": 16}}
    with simulator(*flags, "--ttft-ms", "5", "--itl-ms", "1") as url:
        outcome, out = trusted(url, tmp_path, **config)
    records = read_records(out / "records.jsonl")
    assert len(records) == 60
    errors = [r["error"] for r in records if r["error"]]
    assert 5 < len(errors) < 50
    assert any(e.startswith("HTTP 500") for e in errors)
    assert outcome.verdict.status == Status.FAIL, outcome.verdict.reason
    assert "requests failed" in outcome.verdict.reason


@pytest.mark.parametrize("api", ["chat", "tgi"])
def test_chat_and_tgi_protocols(api: str, sim_url: str, trusted: Any, tmp_path: Path) -> None:
    config = {"api": api, "concurrency": 2, "requests": 6, "dataset": {"output_tokens": 8}}
    outcome, out = trusted(sim_url, tmp_path, **config)
    records = read_records(out / "records.jsonl")
    assert outcome.verdict.status == Status.PASS, outcome.verdict.reason
    assert [len(r["chunks_ns"]) for r in records] == [8] * 6
    assert all(r["usage_output_tokens"] == 8 for r in records)
    assert outcome.summary["itl_ms"]["n"] == 6 * 7
