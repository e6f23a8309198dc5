"""What llm-d's inference-scheduling experiment measures: the pool's prefix-cache hit rate, from
the servers' own counters (``vllm:prefix_cache_hits_total`` / ``…_queries_total``) summed over
every pod, and a stand-in's word on the flags it does not play, in the treatment's problems."""

from __future__ import annotations

from pathlib import Path

from testbed.clients.endpoint import Endpoint
from testbed.clients.prometheus import parse
from testbed.config.server_metrics import ServerMetrics
from testbed.probes.server_metrics import SAMPLES_FILE, sampling
from testbed.probes.server_metrics.summary import ClientTokens, headline, read_samples, summarise
from testbed.report.headline import _row
from testbed.results.run_summary import TreatmentRow
from testbed.results.summaries import HIGHER, direction
from tests.probes.server_metrics.test_server_metrics_pods import Page, serving


class CachePage(Page):
    """A pod with prefix-cache counters and, optionally, a stand-in's not-played flags."""

    def __init__(self, not_played: str = "") -> None:
        super().__init__(0, 0, 0, 0.0)
        self.values |= {"queries": 0, "hits": 0}
        self.not_played = not_played

    def text(self) -> bytes:
        v = self.values
        extra = (
            f'vllm:prefix_cache_queries_total{{model_name="m"}} {v["queries"]}\n'
            f'vllm:prefix_cache_hits_total{{model_name="m"}} {v["hits"]}\n'
        )
        if self.not_played:
            extra += f'testbed_sim:not_played_info{{model_name="m",flags="{self.not_played}"}} 1\n'
        return super().text() + extra.encode()


def test_the_counters_are_read_by_vllms_names() -> None:
    text = (
        'vllm:prefix_cache_queries_total{model_name="m",engine="0"} 700\n'
        'vllm:prefix_cache_queries_total{model_name="m",engine="1"} 300\n'
        'vllm:prefix_cache_hits_total{model_name="m",engine="0"} 600\n'
    )
    values = parse(text)
    assert (values["prefix_cache_queries"], values["prefix_cache_hits"]) == (1000.0, 600.0)
    older = parse("vllm:gpu_prefix_cache_queries_total 10\nvllm:gpu_prefix_cache_hits_total 4\n")
    assert (older["prefix_cache_queries"], older["prefix_cache_hits"]) == (10.0, 4.0)


async def test_the_hit_rate_is_the_pools_over_the_probe_and_not_played_flags_are_problems(
    tmp_path: Path,
) -> None:
    one, two = CachePage("--kv-cache-dtype fp8"), CachePage()
    one.values |= {"queries": 5000, "hits": 4000}  # before the probe: not counted
    async with serving(one, two) as urls:
        endpoint = Endpoint("http://127.0.0.1:9", metrics_urls=tuple(urls))
        settings = ServerMetrics(interval_s=0.1)
        async with sampling(tmp_path, {"stack": endpoint}, settings) as session:
            assert session.active, session.problems
            one.values |= {"queries": 5000 + 1400, "hits": 4000 + 1200}
            two.values |= {"queries": 600, "hits": 0}  # a pod that never saw the prefix
    samples = read_samples(tmp_path / SAMPLES_FILE)
    part = summarise(samples, {"stack": ClientTokens(None, None)}, settings)
    cache = part["deployments"]["stack"]["prefix_cache"]
    assert cache == {"queries": 2000.0, "hits": 1200.0, "hit_rate": 0.6}
    assert part["prefix_cache_hit_rate"] == 0.6
    assert part["problems"] == [
        "stack: pod 1: --kv-cache-dtype fp8 — the stand-in does not play these"
    ]
    assert "prefix cache hit rate 60.0%" in headline(part)[0]
    assert direction("server_metrics.prefix_cache_hit_rate") == HIGHER
    row = TreatmentRow(id="t", dir="001__t", probe="load", params={}, params_key="k", status="PASS")
    assert '<td class="num">60.0</td>' in _row(row, {"server_metrics": part})


def test_a_server_without_the_counters_has_no_rate() -> None:
    sample = {"deployment": "d", "phase": "start", "t_ns": 1, "prompt_tokens": 1.0}
    part = summarise([sample, {**sample, "phase": "final", "t_ns": 2}], {}, ServerMetrics())
    assert part["deployments"]["d"]["prefix_cache"] is None
    assert part["prefix_cache_hit_rate"] is None
