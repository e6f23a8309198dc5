"""The llm-d Benchmark Report v0.2.1 (issue 36): every load treatment writes one per stage,
which the ``llmd-benchmark-report`` package's validation accepts, filled only from what
testbed knows; ``testbed compare`` takes a report as a side, with its caveats."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from llmd_benchmark_report import load_benchmark_report

from testbed.cli import main
from testbed.config.sim import SimParams
from testbed.results.benchmark_report import NO_RECORDS, caveats, metrics_of
from testbed.servers.sim import serve_in_thread

FLAGS = ["--requests", "30", "--output-tokens", "8", "--no-plots"]


@pytest.fixture(scope="module")
def loads(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("br")
    out = {"one": root / "one", "sweep": root / "sweep"}
    with serve_in_thread(SimParams(ttft_ms=3.0, itl_ms=1.0)) as url:
        assert main(["load", url, "--concurrency", "2", *FLAGS, "--out", str(out["one"])]) == 0
        sweep = ["--profile", "sweep", "--sweep-rates", "2", "--sweep-max-concurrency", "4"]
        assert main(["load", url, *sweep, *FLAGS, "--out", str(out["sweep"])]) == 0
    return out


def reports(folder: Path) -> dict[str, dict[str, Any]]:
    summary = json.loads((folder / "summary.json").read_text())
    return {name: json.loads((folder / name).read_text()) for name in summary["benchmark_reports"]}


def test_each_stage_writes_a_report_the_package_accepts(loads: dict[str, Path]) -> None:
    (one,) = reports(loads["one"]).values()
    assert load_benchmark_report(one).version == "0.2.1"
    summary = json.loads((loads["one"] / "summary.json").read_text())
    latency = one["results"]["request_performance"]["aggregate"]["latency"]
    assert latency["time_to_first_token"]["p50"] == summary["ttft_ms"]["p50"]
    assert latency["inter_token_latency"]["units"] == "ms/token"
    load = one["scenario"]["load"]["standardized"]
    assert (load["tool"], load["concurrency"], load["source"]) == ("testbed", 2, "random")
    assert one["run"]["eid"] == summary["setup"]["request_ids"]
    assert "stack" not in one["scenario"]  # testbed does not guess llm-d components
    # enforced (ignore_eos, the default): the measured output length, 8 tokens each
    assert (load["output_seq_len"]["value"], load["output_seq_len"]["std_dev"]) == (8.0, 0.0)
    sweep = reports(loads["sweep"])
    assert len(sweep) == 4  # synchronous, saturation, two rates
    for report in sweep.values():
        load_benchmark_report(report)
    stages = sorted(r["scenario"]["load"]["standardized"]["stage"] for r in sweep.values())
    assert stages == [0, 1, 2, 3]
    rated = [r for r in sweep.values() if "rate_qps" in r["scenario"]["load"]["standardized"]]
    assert len(rated) == 2


def test_a_report_reads_back_in_testbeds_names_and_units() -> None:
    report = {
        "version": "0.2.1",
        "run": {"uid": "x"},
        "results": {
            "request_performance": {
                "aggregate": {
                    "requests": {"total": 10, "failures": 1, "incomplete": 2},
                    "latency": {
                        "time_to_first_token": {"units": "s", "mean": 0.5, "p99": 1.5},
                        "inter_token_latency": {"units": "ms/token", "mean": 4.0},
                    },
                    "throughput": {"request_rate": {"units": "queries/s", "mean": 7.5}},
                }
            }
        },
    }
    load_benchmark_report(report)
    assert metrics_of(report) == {
        "ttft_ms.mean": 500.0,
        "ttft_ms.p99": 1500.0,
        "itl_ms.mean": 4.0,
        "throughput.requests_per_s": 7.5,
        "requests.total": 10.0,
        "requests.errors": 3.0,
    }


def test_compare_takes_a_report_as_a_side_with_its_caveats(
    loads: dict[str, Path], tmp_path: Path
) -> None:
    (name,) = reports(loads["one"])
    report = loads["one"] / name
    slower = json.loads(report.read_text())
    ttft = slower["results"]["request_performance"]["aggregate"]["latency"]
    ttft["time_to_first_token"] = {
        k: v * 3 if isinstance(v, float) else v for k, v in ttft["time_to_first_token"].items()
    }
    (tmp_path / "slower.json").write_text(json.dumps(slower))
    out = tmp_path / "c.json"
    code = main(["compare", str(report), str(tmp_path / "slower.json"), "--json", str(out)])
    found = json.loads(out.read_text())
    assert code == 0  # no records: a change is unverified, never a failure
    ttft_p50 = next(m for m in found["metrics"] if m["metric"] == "ttft_ms.p50")
    assert ttft_p50["outcome"] == "unverified"
    assert ttft_p50["change"] == pytest.approx(2.0)
    assert found["warnings"] == [NO_RECORDS]  # testbed's own report: the same client
    assert caveats(slower) == [NO_RECORDS]
    code = main(["compare", str(loads["one"]), str(report), "--json", str(out)])
    assert code == 0
    assert {m["metric"] for m in json.loads(out.read_text())["metrics"]} >= {"ttft_ms.p99"}
