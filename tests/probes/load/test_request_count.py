"""``requests`` is a count, not a hint: a stage given one runs exactly that many; a duration
the user gave that ends it first makes it INCONCLUSIVE saying how many of how many ran; an
open-loop stage ended by its count has its window (and so its rates) end at its last send."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from testbed.config.load import LoadProbe
from testbed.config.loader import load_campaign
from testbed.plan.expand import expand
from testbed.probes.load import profiles
from testbed.probes.load.schedule import offsets_ns
from testbed.probes.load.summary import verdict_of
from testbed.results.files import read_records
from testbed.results.verdict import Status

EXAMPLES = Path(__file__).parents[3] / "examples"
TINY = {"kind": "synthetic", "input_tokens": 4, "output_tokens": 8}


def _planned(config: dict[str, Any] | LoadProbe) -> list[tuple[float | None, int | None]]:
    """(duration, request count) of each stage the load section plans first."""
    stages = profiles.first_stages(LoadProbe.model_validate(config))
    return [(s.duration_s, s.max_requests) for s in stages]


def test_a_count_alone_is_not_bounded_by_the_default_duration() -> None:
    """Only a section with neither bound gets the 10 s default; a count has no time bound
    unless the user gives one, and then it is theirs."""
    assert _planned({"requests": 400}) == [(None, 400)]
    assert _planned({}) == [(10.0, None)]
    assert _planned({"requests": 400, "duration_s": 3600}) == [(3600, 400)]
    sweep = {"profile": "sweep", "requests": 50}
    assert _planned(sweep) == [(None, 50), (None, 50)]


def test_an_open_loop_count_schedules_every_request() -> None:
    """400 arrivals at 20/s take 20 s: the whole count is scheduled, not the first 10 s."""
    for arrival in ("constant", "poisson"):
        config = {"profile": "rate", "rate": 20, "requests": 400, "arrival": arrival}
        (stage,) = profiles.first_stages(LoadProbe.model_validate(config))
        assert stage.arrivals is not None
        assert len(offsets_ns(stage.arrivals, stage.duration_s, stage.max_requests, 3)) == 400


def test_a_ramp_needs_its_length_not_a_count() -> None:
    """A ramp rises over its duration; a count alone cannot say how fast."""
    with pytest.raises(ValidationError, match="give `duration_s` too"):
        LoadProbe.model_validate({"profile": "ramp", "requests": 100})
    assert _planned({"profile": "ramp", "requests": 100, "duration_s": 5}) == [(5, 100)]


@pytest.mark.parametrize(
    ("example", "presets", "count"),
    [("quickstart.yaml", [], 24), ("inference-scheduling.yaml", ["smoke"], 500)],
)
def test_campaign_treatments_run_their_count(example: str, presets: list[str], count: int) -> None:
    """What a load treatment runs is its plan's section (execution/treatment.py hands it
    to the probe): the count survives, and no default duration cuts it."""
    plan = expand(load_campaign(EXAMPLES / example, presets=presets))
    sections = [c for key, c in plan.probe_configs.items() if key.startswith("load:")]
    assert sections
    for section in sections:
        assert _planned(section) == [(None, count)]


def test_duration_before_count_is_inconclusive_and_says_so(
    sim_url: str, once: Any, tmp_path: Path
) -> None:
    """Closed loop, one at a time, 20 ms a request: 0.3 s holds about 15 of the 1000."""
    outcome = once(sim_url, tmp_path, concurrency=1, requests=1000, duration_s=0.3, dataset=TINY)
    ran = len(read_records(tmp_path / "records.jsonl"))
    assert 0 < ran < 1000
    summary = outcome.summary
    assert summary["requests"]["asked"] == 1000
    assert summary["requests"]["total"] == ran
    assert summary["cut_short"].startswith(f"{ran} of 1000 requests ran: duration_s (0.3 s)")
    assert outcome.verdict.status == Status.INCONCLUSIVE
    assert f"{ran} of 1000 requests ran" in outcome.verdict.reason


def test_open_loop_schedule_cut_by_duration_is_inconclusive(
    instant_url: str, once: Any, tmp_path: Path
) -> None:
    """20/s for 0.5 s schedules 10 of the 50 asked (constant gaps: exactly 10)."""
    config = {"profile": "rate", "rate": 20, "arrival": "constant", "dataset": TINY}
    outcome = once(instant_url, tmp_path, requests=50, duration_s=0.5, **config)
    assert outcome.summary["requests"]["total"] == 10
    assert outcome.verdict.status == Status.INCONCLUSIVE
    assert outcome.verdict.reason.startswith("rate-20: 10 of 50 requests ran")


def test_count_reached_within_the_duration_is_not_cut_short(
    instant_url: str, once: Any, tmp_path: Path
) -> None:
    outcome = once(instant_url, tmp_path, concurrency=2, requests=12, duration_s=60, dataset=TINY)
    requests = outcome.summary["requests"]
    assert (requests["asked"], requests["total"]) == (12, 12)
    assert outcome.summary["cut_short"] is None
    assert outcome.verdict.status == Status.PASS, outcome.verdict.reason


def test_open_loop_window_ends_at_the_last_send(
    instant_url: str, once: Any, tmp_path: Path
) -> None:
    """40 requests at 20/s with a 3600 s bound send for 1.95 s: the window, the rates, the
    throughput and the goodput are those of the 1.95 s, not diluted over 3600 s (where the
    old window read 40 / 3600 = 0.011 requests/s)."""
    config = {"profile": "rate", "rate": 20, "arrival": "constant", "dataset": TINY}
    slo = {"ttft_p99_ms": 5000, "e2e_p99_ms": 5000}
    outcome = once(instant_url, tmp_path, requests=40, duration_s=3600, slo=slo, **config)
    summary = outcome.summary
    assert summary["requests"]["total"] == 40
    assert summary["window"]["seconds"] == pytest.approx(1.95)
    harness, throughput = summary["harness"], summary["throughput"]
    assert harness["requested_rate"] == pytest.approx(20.0)
    assert harness["achieved_rate"] == pytest.approx(20.0, rel=0.1)  # 39 sends in 1.95 s
    # the instant simulator answers each within the window but (perhaps) the last one
    assert throughput["requests_per_s"] > 17.0
    assert throughput["output_tokens_per_s"] > 17.0 * 8
    assert throughput["goodput_requests_per_s"] > 17.0
    assert outcome.verdict.status == Status.PASS, outcome.verdict.reason


def _stage(name: str, cut_short: str | None = None) -> dict[str, Any]:
    """A stage summary that passes on its own (for the verdict alone)."""
    return {
        "stage": name,
        "requests": {"total": 5, "ok": 5, "errors": 0, "server_errors": 0, "in_window": 5},
        "selfcheck": {"ok": True, "problems": []},
        "cut_short": cut_short,
    }


def test_a_cut_short_saturation_stage_is_inconclusive_too() -> None:
    """The sweep's saturation stage may overload the harness, but running fewer requests
    than asked is never silent, in any stage."""
    config = LoadProbe.model_validate({"profile": "sweep", "requests": 5, "duration_s": 1})
    stages = [_stage("synchronous"), _stage("saturation", "2 of 5 requests ran: …")]
    verdict = verdict_of(stages, config)
    assert verdict.status == Status.INCONCLUSIVE
    assert verdict.reason == "saturation: 2 of 5 requests ran: …"
    assert verdict_of([_stage("synchronous"), _stage("saturation")], config).status == Status.PASS
