"""Reading a metrics page: vLLM's and TGI's names onto one set of fields."""

from __future__ import annotations

import pytest

from testbed.clients.prometheus import FIELDS, MetricsError, parse

VLLM_PAGE = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 2.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 1.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="m"} 1280.0
# TYPE vllm:generation_tokens counter
vllm:generation_tokens_total{engine="0",model_name="m"} 640.0
vllm:generation_tokens_created{engine="0",model_name="m"} 1.7e9
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{le="0.3",model_name="m"} 1.0
vllm:e2e_request_latency_seconds_sum{model_name="m"} 0.1
"""

TGI_PAGE = """\
# TYPE tgi_queue_size gauge
tgi_queue_size 4
# TYPE tgi_batch_current_size gauge
tgi_batch_current_size 8
# TYPE tgi_request_input_length histogram
tgi_request_input_length_bucket{le="10"} 1
tgi_request_input_length_bucket{le="+Inf"} 3
tgi_request_input_length_sum 300
tgi_request_input_length_count 3
# TYPE tgi_request_generated_tokens histogram
tgi_request_generated_tokens_bucket{le="+Inf"} 3
tgi_request_generated_tokens_sum 96
tgi_request_generated_tokens_count 3
"""


def test_vllm_names_summed_over_label_sets() -> None:
    values = parse(VLLM_PAGE)
    assert values == {
        "running": 5.0,
        "waiting": 1.0,
        "kv_cache_usage": 0.25,
        "prompt_tokens": 1280.0,
        "generation_tokens": 640.0,
        "prefix_cache_queries": None,  # this page has no prefix cache counters
        "prefix_cache_hits": None,
    }


def test_older_vllm_cache_name() -> None:
    page = 'vllm:gpu_cache_usage_perc{model_name="m"} 0.5\n'
    assert parse(page)["kv_cache_usage"] == pytest.approx(0.5)


def test_tgi_names_and_histogram_sums() -> None:
    values = parse(TGI_PAGE)
    assert values["running"] == 8.0
    assert values["waiting"] == 4.0
    assert values["prompt_tokens"] == 300.0
    assert values["generation_tokens"] == 96.0
    assert values["kv_cache_usage"] is None


def test_unknown_page_gives_no_values() -> None:
    assert parse("# nothing here\nother_metric 1\n") == dict.fromkeys(FIELDS)


def test_garbage_in_a_wanted_line_is_an_error() -> None:
    with pytest.raises(MetricsError):
        parse("vllm:num_requests_running{model_name=} three\n")


def test_testbed_servers_expose_the_names_read() -> None:
    """The simulator's and the reference server's pages parse to the same fields as vLLM's
    (the reference server's module imports no torch)."""
    from testbed.servers.reference.metrics import EngineMetrics
    from testbed.servers.sim.metrics import SimMetrics

    sim = SimMetrics("m")
    sim.running, sim.waiting, sim.prompt_tokens, sim.generation_tokens = 2, 1, 30, 12
    sim.prefix_cache_queries, sim.prefix_cache_hits = 30, 16
    assert parse(sim.render()) == {
        "running": 2.0,
        "waiting": 1.0,
        "kv_cache_usage": 0.0,  # no KV cache attached: nothing in use
        "prompt_tokens": 30.0,
        "generation_tokens": 12.0,
        "prefix_cache_queries": 30.0,
        "prefix_cache_hits": 16.0,
    }
    ref = EngineMetrics("m", running=3, prompt_tokens=40, kv_tokens=96, kv_capacity=384)
    values = parse(ref.render())
    assert values["running"] == 3.0
    assert values["prompt_tokens"] == 40.0
    assert values["kv_cache_usage"] == pytest.approx(0.25)
