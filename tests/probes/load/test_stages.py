"""``load.stages``: several fixed rates in a row within one treatment (llm-d's workload
profiles, inference-perf's ``stages``) — each stage its own window, rate and figures."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from testbed.config.load import LoadProbe
from testbed.probes.load import profiles, progress
from testbed.results.files import read_records
from testbed.results.summaries import summary_metrics

TINY = {"kind": "synthetic", "input_tokens": 4, "output_tokens": 4}


def test_three_rate_stages_run_each_at_its_own_rate(
    instant_url: str, once: Any, tmp_path: Path
) -> None:
    """Three stages of 1 s at 20, 40 and 80 requests/s (constant arrivals): three windows,
    one after another, each with its own achieved rate and request count."""
    outcome = once(
        instant_url,
        tmp_path,
        stages=[
            {"rate": 20, "duration_s": 1},
            {"rate": 40, "duration_s": 1},
            {"rate": 80, "duration_s": 1, "name": "peak"},
        ],
        arrival="constant",
        dataset=TINY,
    )
    summary = outcome.summary
    assert summary["profile"] == "rate"
    stages = summary["stages"]
    assert [s["stage"] for s in stages] == ["rate-20", "rate-40", "peak"]
    for stage, rate in zip(stages, (20, 40, 80), strict=True):
        assert stage["load"]["rate"] == rate
        assert stage["harness"]["requested_rate"] == pytest.approx(rate)
        assert stage["harness"]["achieved_rate"] == pytest.approx(rate, rel=0.15)
        assert stage["requests"]["total"] == pytest.approx(rate, abs=2)
        assert stage["ttft_ms"]["n"] > 0
    windows = [(s["window"]["start_ns"], s["window"]["end_ns"]) for s in stages]
    assert all(end <= start for (_, end), (start, _) in itertools.pairwise(windows))
    records = read_records(tmp_path / "records.jsonl")
    assert {r["stage"] for r in records} == {"rate-20", "rate-40", "peak"}
    # compare reads each stage's figures by name
    flat = summary_metrics(summary)
    assert flat["stages.peak.harness.achieved_rate"] == pytest.approx(80, rel=0.15)
    assert outcome.verdict.status.value == "PASS", outcome.verdict.reason


def test_a_stage_given_requests_runs_that_many(instant_url: str, once: Any, tmp_path: Path) -> None:
    """A stage's own count runs in full, the other stage keeps the load's duration."""
    outcome = once(instant_url, tmp_path, stages="50:15r,30:0.5", duration_s=5, dataset=TINY)
    first, second = outcome.summary["stages"]
    assert first["requests"]["asked"] == 15
    assert first["requests"]["total"] == 15
    assert second["requests"]["asked"] is None
    assert second["requests"]["total"] == pytest.approx(15, abs=8)


def test_stage_bounds_fall_back_to_the_loads() -> None:
    config = LoadProbe.model_validate(
        {"stages": [{"rate": 2}, {"rate": 5, "duration_s": 50}, {"rate": 8, "requests": 9}]}
    )
    planned = [(s.name, s.duration_s, s.max_requests) for s in profiles.first_stages(config)]
    assert planned == [("rate-2", 10.0, None), ("rate-5", 50, None), ("rate-8", None, 9)]
    assert progress.stage_count(config) == 3
    counted = LoadProbe.model_validate({"stages": "2:50,5", "requests": 100})
    bounds = [(s.duration_s, s.max_requests) for s in profiles.first_stages(counted)]
    assert bounds == [(50, 100), (None, 100)]


@pytest.mark.parametrize(
    ("section", "words"),
    [
        ({"stages": "2:50,2:60"}, "rate-2 named twice"),
        ({"stages": "2:50", "rate": 3}, "not both"),
        ({"stages": "2:50", "profile": "sweep"}, "set profile: rate"),
        ({"stages": "2:50", "profile": "concurrency"}, "set profile: rate"),
        ({"stages": "2:5,4:1", "warmup_s": 1}, r"stages\[1\] \(rate-4\)"),
        ({"stages": [{"rate": 2, "name": "a.b"}]}, "name"),
        ({"stages": [{"rate": 0}]}, "greater than 0"),
        ({"stages": []}, "at least 1"),
        ({"stages": "2:50", "dataset": {"kind": "trace", "path": "t.jsonl"}}, "own send times"),
    ],
)
def test_bad_stage_lists_are_refused(section: dict[str, Any], words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        LoadProbe.model_validate(section)


def test_stages_compose_with_sessions_and_a_model_mix() -> None:
    """Sessions and a model mix are per stage; nothing to refuse."""
    config = LoadProbe.model_validate(
        {
            "stages": "1:5,2:5",
            "dataset": {"kind": "sessions", "turns": 2},
            "models": ["a", "b"],
        }
    )
    assert len(profiles.first_stages(config)) == 2
