"""The load probe end to end against the simulator (a child process).

Each test runs the probe once. A test that judges a verdict runs against a paced simulator
(against an instant one the generator itself is the bottleneck) with the generous self-check
limits of ``once`` (the self-check has its own tests); measured values are judged with
tolerances derived from the sample size, and wall-clock assertions carry the ``timing``
marker.
"""

from __future__ import annotations

import asyncio
import json
import math
import socket
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

from testbed.core.errors import InfrastructureError
from testbed.probes.load import run
from testbed.results import metrics
from testbed.results.files import read_records
from testbed.results.verdict import Status
from tests.sampling import ALPHA, median_interval
from tests.verdicts import assert_passed

KEYS = ("p50", "p90", "p95", "p99", "p999", "mean", "std", "n")


def test_concurrency_summary_shape_and_records(sim_url: str, once: Any, tmp_path: Path) -> None:
    out = tmp_path
    outcome = once(sim_url, out, concurrency=4, duration_s=1.0)
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
    assert s["setup"]["read_path"] == "compiled"  # the test command builds it
    assert (out / "latency_cdf.png").stat().st_size > 1000
    assert (out / "time_series.png").stat().st_size > 1000


@pytest.mark.slow
@pytest.mark.timing
def test_accuracy_against_the_simulator_ground_truth(
    sim_url: str, once: Any, tmp_path: Path
) -> None:
    """The simulator waits 10 ms before the first token and 2 ms between tokens. At a
    CI-safe 20 requests/s for 3 s (bench/load_accuracy.py reports 200/s), one run:

    - no TTFT is below 10 ms (the client cannot see a token before it is sent: a hard bound
      that wrong timestamps would break);
    - the median TTFT and the median of each request's median ITL are within 0.5 ms of the
      truth, judged by the order-statistic interval of the median from n = 60 requests
      (so a burst of someone else's load on a shared machine widens what n allows, instead
      of failing or being retried).
    """
    config = {"profile": "rate", "rate": 20, "duration_s": 3.0, "arrival": "constant"}
    outcome = once(sim_url, tmp_path, **config)
    records = [r for r in read_records(tmp_path / "records.jsonl") if metrics.is_ok(r)]
    assert len(records) == 60, outcome.summary["requests"]
    ttfts = [t for r in records if (t := metrics.ttft_ms(r)) is not None]
    itls = [float(np.median(metrics.itl_ms(r))) for r in records]
    assert min(ttfts) >= 10.0
    for values, truth in ((ttfts, 10.0), (itls, 2.0)):
        low, high = median_interval(values)
        assert low <= truth + 0.5, (truth, low, high)
        assert high >= truth - 0.5, (truth, low, high)
    assert outcome.summary["harness"]["achieved_rate"] == pytest.approx(20, rel=0.1)


@pytest.mark.timing
def test_rate_profile_hits_the_requested_rate(instant_url: str, once: Any, tmp_path: Path) -> None:
    outcome = once(instant_url, tmp_path, profile="rate", rate=100, duration_s=2.0)
    harness = outcome.summary["harness"]
    # The schedule is Poisson: about λT = 200 arrivals, whose count has a relative standard
    # deviation of 1/√200; five of them bound it.
    assert harness["requested_rate"] == pytest.approx(100, rel=5 / math.sqrt(100 * 2.0))
    assert harness["achieved_rate"] == pytest.approx(harness["requested_rate"], rel=0.1)
    assert harness["precise_timer"] is True


def test_missed_slo_fails(sim_url: str, once: Any, tmp_path: Path) -> None:
    slo = {"ttft_p99_ms": 5.0}  # the simulator's TTFT is 10 ms: missed on any machine
    outcome = once(sim_url, tmp_path, concurrency=2, duration_s=0.5, slo=slo)
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
        pytest.raises(InfrastructureError, match=r"server at http://\S+: cannot connect to"),
    ):
        asyncio.run(run(ctx))


def test_cli_load_writes_summary(sim_url: str, tmp_path: Path) -> None:
    """One run through the CLI, with the default self-check: its verdict is PASS, or
    INCONCLUSIVE when the machine was too busy for the harness to trust itself — both exit
    0 (README, Exit codes); anything else the CLI did is checked exactly."""
    from testbed.cli import main

    args = ["load", sim_url, "--concurrency", "2", "--requests", "20", "--output-tokens", "16"]
    code = main([*args, "--out", str(tmp_path), "--json"])
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert code == 0, summary["verdict"]
    assert_passed(summary)  # INCONCLUSIVE only for the harness's own distrust
    assert summary["requests"]["total"] == 20
    assert len(read_records(tmp_path / "records.jsonl")) == 20


def test_faulty_server_errors_are_recorded_and_fail(
    simulator: Any, once: Any, tmp_path: Path
) -> None:
    flags = ("--error-rate", "0.2", "--disconnect-rate", "0.1", "--malformed-rate", "0.1")
    config = {"concurrency": 4, "requests": 60, "dataset": {"output_tokens": 16}}
    with simulator(*flags, "--ttft-ms", "5", "--itl-ms", "1") as url:
        outcome = once(url, tmp_path, **config)
    records = read_records(tmp_path / "records.jsonl")
    assert len(records) == 60
    errors = [r["error"] for r in records if r["error"]]
    # Each request draws the three faults independently: it fails with p = 1 − 0.8·0.9·0.9.
    low, high = stats.binom.interval(1 - ALPHA, 60, 1 - 0.8 * 0.9 * 0.9)
    assert low <= len(errors) <= high
    assert any(e.startswith("HTTP 500") for e in errors)
    assert outcome.verdict.status == Status.FAIL, outcome.verdict.reason
    assert "requests failed" in outcome.verdict.reason


@pytest.mark.parametrize("api", ["chat", "tgi"])
def test_chat_and_tgi_protocols(api: str, sim_url: str, once: Any, tmp_path: Path) -> None:
    config = {"api": api, "concurrency": 2, "requests": 6, "dataset": {"output_tokens": 8}}
    outcome = once(sim_url, tmp_path, **config)
    records = read_records(tmp_path / "records.jsonl")
    assert outcome.verdict.status == Status.PASS, outcome.verdict.reason
    assert [len(r["chunks_ns"]) for r in records] == [8] * 6
    assert all(r["usage_output_tokens"] == 8 for r in records)
    assert outcome.summary["itl_ms"]["n"] == 6 * 7
