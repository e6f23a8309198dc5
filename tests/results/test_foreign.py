"""Another harness's results read as llm-d Benchmark Reports through the package's own
converters (issue 36): guidellm, vLLM's benchmark and inference-perf files written here from
their formats, each field read as its tool defines it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed.core.errors import InputError
from testbed.results import foreign
from testbed.results.benchmark_report import GUIDELLM_ITL, caveats, metrics_of

HARNESSES = Path(__file__).parent.parent / "fixtures" / "harnesses"
GUIDELLM = HARNESSES / "guidellm_benchmarks.json"
VLLM = HARNESSES / "vllm_bench_serve.json"
INFERENCE_PERF = HARNESSES / "stage_0_lifecycle_metrics.json"


def test_each_harness_file_converts_to_reports_in_testbeds_names_and_units() -> None:
    guidellm = foreign.read(GUIDELLM)
    assert guidellm is not None
    assert guidellm.kind == foreign.GUIDELLM
    assert len(guidellm.reports) == 2  # one per benchmark of the sweep
    first = metrics_of(guidellm.reports[0])
    assert first["ttft_ms.p50"] == pytest.approx(21.35)
    # guidellm's ITL is (last - first token) / (tokens - 1) per request: testbed's TPOT
    assert first["tpot_ms.p50"] == pytest.approx(5.1)
    assert not any(name.startswith("itl_ms") for name in first)
    assert first["e2e_ms.p50"] == pytest.approx(343.0)  # guidellm's seconds, in ms
    assert (first["throughput.requests_per_s"], first["requests.total"]) == (5.8, 40.0)
    assert guidellm.notes == []  # the converter's harness-pod warning is not the user's

    vllm = foreign.read(VLLM)
    assert vllm is not None
    assert vllm.kind == foreign.VLLM
    (report,) = vllm.reports
    figures = metrics_of(report)
    # vLLM's ITL is every gap, as testbed's; its TPOT excludes the first token, as ours
    assert (figures["itl_ms.p99"], figures["tpot_ms.p99"]) == (6.6, 5.9)
    assert figures["ttft_ms.p50"] == 21.35

    perf = foreign.read(INFERENCE_PERF)
    assert perf is not None
    assert perf.kind == foreign.INFERENCE_PERF
    figures = metrics_of(perf.reports[0])
    assert figures["ttft_ms.p50"] == pytest.approx(21.5)  # its seconds, in ms
    assert figures["itl_ms.p50"] == pytest.approx(5.1)
    assert figures["throughput.output_tokens_per_s"] == 251.0


def test_a_benchmark_is_picked_by_its_index(tmp_path: Path) -> None:
    picked = foreign.read(Path(f"{GUIDELLM}#1"))
    assert picked is not None
    assert picked.indices == [1]
    assert metrics_of(picked.reports[0])["ttft_ms.p50"] == pytest.approx(23.9)
    with pytest.raises(InputError, match="holds 2 benchmark"):
        foreign.read(Path(f"{GUIDELLM}#2"))


def test_caveats_name_the_other_clients_clock_and_guidellms_itl() -> None:
    guidellm = foreign.read(GUIDELLM)
    assert guidellm is not None
    said = caveats(guidellm.reports[0])
    assert any("guidellm's latencies were timed by its own client" in line for line in said)
    assert GUIDELLM_ITL in said
    vllm = foreign.read(VLLM)
    assert vllm is not None
    assert GUIDELLM_ITL not in caveats(vllm.reports[0])


def test_a_broken_file_of_a_known_shape_is_the_users_mistake(tmp_path: Path) -> None:
    broken = json.loads(VLLM.read_text())
    del broken["num_prompts"]  # the converter subtracts completed from it
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(broken))
    with pytest.raises(InputError, match=r"bench\.json: read as vllm-benchmark") as caught:
        foreign.read(path)
    assert caught.value.exit_code == 2
    report = {"version": "0.2.1", "run": {"uid": "x"}, "results": {"request_performance": 7}}
    path.write_text(json.dumps(report))
    with pytest.raises(InputError, match=r"not a valid llm-d Benchmark Report 0\.2\.1"):
        foreign.read(path)


def test_other_files_and_folders_are_not_foreign_results(tmp_path: Path) -> None:
    (tmp_path / "other.json").write_text('{"benchmarks": "none"}')
    (tmp_path / "notes.txt").write_text("hello")
    for path in (tmp_path, tmp_path / "other.json", tmp_path / "notes.txt", tmp_path / "x"):
        assert foreign.read(path) is None
