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
    """``limit: 2`` with ``shuffle: false`` sends only the first two prompts (1 and 2 words)."""
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(
        "".join(json.dumps({"prompt": " ".join(["w"] * n)}) + "\n" for n in range(1, 6))
    )
    dataset = {"kind": "file", "path": str(prompts), "limit": 2, "shuffle": False}
    once(instant_url, tmp_path, requests=6, dataset=dataset, plots=False)
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
    assert strict.verdict.status == Status.FAIL
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
