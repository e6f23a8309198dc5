"""The simulator's parts without the network: parameters, latency model, text, metrics."""

from __future__ import annotations

import statistics

import pytest
from pydantic import ValidationError

from testbed.cli import build_parser
from testbed.cli.serve import sim_params
from testbed.config.sim import SimParams
from testbed.servers.sim.latency import LatencyModel
from testbed.servers.sim.metrics import Histogram, SimMetrics
from testbed.servers.sim.text import count_tokens, generate


def test_params_reject_unknown_fields_and_need_a_limit_for_a_queue() -> None:
    with pytest.raises(ValidationError):
        SimParams(ttft=3)  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="max_waiting"):
        SimParams(max_waiting=4)
    assert SimParams(max_concurrency=8, max_batch_size=4).effective_concurrency == 4
    assert SimParams().instant
    assert not SimParams(itl_ms=1).instant


def test_cli_overrides_round_trip_through_serve() -> None:
    params = SimParams(
        ttft_ms=12.5,
        model_name="x y",
        jitter={"distribution": "exponential", "itl_scale_ms": 0.5},  # type: ignore[arg-type]
        faults={"error_rate": 0.1},  # type: ignore[arg-type]
        max_model_len=2048,
    )
    args = build_parser().parse_args(["serve", "sim", *params.cli_overrides()])
    assert sim_params(args) == params
    assert SimParams().cli_overrides() == []


def test_ttft_grows_with_prompt_and_running_requests() -> None:
    model = LatencyModel(
        SimParams(ttft_ms=10, ttft_per_prompt_token_ms=0.5, ttft_per_running_ms=2, itl_ms=3)
    )
    assert model.ttft(0, 0) == pytest.approx(0.010)
    assert model.ttft(100, 0) == pytest.approx(0.060)
    assert model.ttft(100, 4) == pytest.approx(0.068)
    assert model.constant_itl
    growing = LatencyModel(SimParams(itl_ms=3, itl_per_running_ms=1))
    assert not growing.constant_itl
    assert growing.itl(5) == pytest.approx(0.008)


@pytest.mark.parametrize(
    ("distribution", "mean_ms", "spread"),
    [("normal", 5.0, 1.0), ("uniform", 5.0, 1.0 / 3**0.5), ("exponential", 6.0, 1.0)],
)
def test_jitter_distributions_have_their_documented_shape(
    distribution: str, mean_ms: float, spread: float
) -> None:
    params = SimParams(
        itl_ms=5,
        jitter={"distribution": distribution, "itl_scale_ms": 1.0},  # type: ignore[arg-type]
    )
    model = LatencyModel(params)
    draws = [model.itl(0) * 1e3 for _ in range(20000)]
    assert min(draws) >= 0
    assert statistics.fmean(draws) == pytest.approx(mean_ms, abs=0.05)
    assert statistics.pstdev(draws) == pytest.approx(spread, rel=0.05)
    again = LatencyModel(params)
    assert [again.itl(0) * 1e3 for _ in range(5)] == draws[:5]  # seeded


def test_delays_never_go_negative() -> None:
    model = LatencyModel(
        SimParams(jitter={"distribution": "normal", "ttft_scale_ms": 50})  # type: ignore[arg-type]
    )
    assert min(model.ttft(0, 0) for _ in range(1000)) == 0.0


def test_generation_counts_and_prefix_property() -> None:
    params = SimParams(eos_rate=0.5, vocab_size=50)
    for i in range(50):
        prompt = f"prompt {i}"
        full = generate(params, prompt, max_tokens=16, ignore_eos=True)
        maybe_short = generate(params, prompt, max_tokens=16)
        assert len(full.ids) == 16
        assert full.finish_reason == "length"
        assert full.text.startswith(maybe_short.text)
        assert count_tokens(full.text, "whitespace") == count_tokens(full.text, "chars4") == 16
        assert all(i < 50 for i in full.ids)


def test_histogram_renders_cumulative_buckets() -> None:
    hist = Histogram((0.1, 1.0))
    hist.observe(0.05)
    hist.observe(0.5, times=3)
    hist.observe(5.0)
    lines = hist.render("h", 'a="b"')
    assert 'h_bucket{a="b",le="0.1"} 1' in lines
    assert 'h_bucket{a="b",le="1.0"} 4' in lines
    assert 'h_bucket{a="b",le="+Inf"} 5' in lines
    assert 'h_count{a="b"} 5' in lines
    text = SimMetrics("m").render()
    assert 'vllm:num_requests_waiting{model_name="m"} 0' in text
