"""Load fields that had no test proving they are used (docs/field audit): each test fails if
its field is ignored. Against the instant simulator (a child process), a few requests each."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from testbed.config.load import LoadProbe
from testbed.probes.load import profiles
from testbed.probes.load.schedule import offsets_ns
from testbed.results.files import read_records
from testbed.results.verdict import Status

SHORT = {"kind": "synthetic", "input_tokens": 4, "output_tokens": 3}


def test_keep_text_keeps_each_output(instant_url: str, once: Any, tmp_path: Path) -> None:
    for keep in (True, False):
        out = tmp_path / str(keep)
        once(instant_url, out, requests=3, keep_text=keep, dataset=SHORT, plots=False)
        records = read_records(out / "records.jsonl")
        assert len(records) == 3
        if keep:
            assert all(len(r["text"].split()) == r["output_tokens"] == 3 for r in records)
        else:
            assert all("text" not in r for r in records)


def test_file_dataset_limit_and_order(instant_url: str, once: Any, tmp_path: Path) -> None:
    """``limit: 2`` with ``shuffle: false`` sends only the first two prompts (1 and 2 words);
    the relative path starts at the campaign's folder, not the working directory."""
    (tmp_path / "campaign").mkdir()
    prompts = tmp_path / "campaign" / "prompts.jsonl"
    prompts.write_text(
        "".join(json.dumps({"prompt": " ".join(["w"] * n)}) + "\n" for n in range(1, 6))
    )
    dataset = {"kind": "file", "path": "prompts.jsonl", "limit": 2, "shuffle": False}
    base_dir = tmp_path / "campaign"
    once(instant_url, tmp_path, base_dir=base_dir, requests=6, dataset=dataset, plots=False)
    records = read_records(tmp_path / "records.jsonl")
    assert sorted(r["input_tokens"] for r in records) == [1, 1, 1, 2, 2, 2]


def test_tpot_and_e2e_slos_judge_the_verdict(sim_url: str, once: Any, tmp_path: Path) -> None:
    """Against ITL 2 ms, a TPOT bound of 0.5 ms and an e2e bound of 1 ms must FAIL; generous
    bounds PASS."""
    base: dict[str, Any] = {"requests": 6, "concurrency": 2, "dataset": SHORT, "plots": False}
    for key, tight in (("tpot_p99_ms", 0.5), ("e2e_p99_ms", 1.0)):
        failed = once(sim_url, tmp_path / key, slo={key: tight}, **base)
        assert failed.verdict.status == Status.FAIL, failed.verdict.reason
        metric = key.removesuffix("_p99_ms")
        assert f"{metric}_ms p99" in failed.verdict.reason
        passed = once(sim_url, tmp_path / f"{key}-ok", slo={key: 10_000.0}, **base)
        assert passed.verdict.status == Status.PASS, passed.verdict.reason


def test_min_success_ratio_judges_failed_requests(
    simulator: Any, once: Any, tmp_path: Path
) -> None:
    """Half the requests answer 500: a stage needing 90 % success FAILs, one needing 10 %
    does not FAIL on that count."""
    with simulator("--set", "faults.error_rate=0.5") as url:
        base: dict[str, Any] = {"requests": 40, "concurrency": 4, "dataset": SHORT, "plots": False}
        strict = once(url, tmp_path / "strict", slo={"min_success_ratio": 0.9}, **base)
        lenient = once(url, tmp_path / "lenient", slo={"min_success_ratio": 0.1}, **base)
    assert strict.verdict.status == Status.FAIL, strict.verdict.reason
    assert "success ratio" in strict.verdict.reason
    assert "success ratio" not in lenient.verdict.reason


def test_ramp_start_rate_shapes_the_arrivals() -> None:
    """A linear ramp from start_rate to end_rate over D seconds has (start + end) / 2 × D
    arrivals, and the first half fewer than the second when it rises."""
    config = LoadProbe.model_validate(
        {"profile": "ramp", "ramp": {"start_rate": 2, "end_rate": 18}, "duration_s": 10,
         "arrival": "constant"}
    )  # fmt: skip
    (stage,) = profiles.first_stages(config)
    assert stage.arrivals is not None
    offsets = offsets_ns(stage.arrivals, stage.duration_s, stage.max_requests, 0)
    assert abs(len(offsets) - 100) <= 2
    first_half = sum(1 for t in offsets if t < 5e9)
    assert abs(first_half - 30) <= 2  # ∫0..5 (2 + 1.6 t) dt = 30


def test_timeout_s_ends_slow_requests(simulator: Any, once: Any, tmp_path: Path) -> None:
    with simulator("--ttft-ms", "2000") as url:
        once(url, tmp_path, requests=2, timeout_s=0.2, dataset=SHORT, plots=False)
    records = read_records(tmp_path / "records.jsonl")
    assert len(records) == 2
    assert all(r["error"] and "timeout" in r["error"].lower() for r in records), records


def test_warmup_and_cooldown_shrink_the_window(sim_url: str, once: Any, tmp_path: Path) -> None:
    base: dict[str, Any] = {"duration_s": 1.0, "concurrency": 2, "dataset": SHORT, "plots": False}
    whole = once(sim_url, tmp_path / "a", **base).summary
    trimmed = once(sim_url, tmp_path / "b", warmup_s=0.3, cooldown_s=0.2, **base).summary
    seconds = whole["window"]["seconds"], trimmed["window"]["seconds"]
    assert abs(seconds[0] - seconds[1] - 0.5) < 0.05, seconds
    assert trimmed["requests"]["in_window"] < trimmed["requests"]["total"]


def test_stream_false_and_api_tgi(instant_url: str, once: Any, tmp_path: Path) -> None:
    once(instant_url, tmp_path / "unary", requests=2, stream=False, dataset=SHORT, plots=False)
    unary = read_records(tmp_path / "unary" / "records.jsonl")
    assert all(len(r["chunks_ns"]) == 1 for r in unary)  # one body, not one chunk per token
    once(instant_url, tmp_path / "s", requests=2, dataset=SHORT, plots=False)
    streamed = read_records(tmp_path / "s" / "records.jsonl")
    assert all(len(r["chunks_ns"]) == 3 for r in streamed)
    once(instant_url, tmp_path / "tgi", requests=2, api="tgi", dataset=SHORT, plots=False)
    tgi = read_records(tmp_path / "tgi" / "records.jsonl")
    # TGI's stream reports generated tokens but no prompt tokens; OpenAI's usage has both
    assert all(r["usage_input_tokens"] is None and r["output_tokens"] == 3 for r in tgi)
    assert all(r["usage_input_tokens"] == 4 for r in streamed)
