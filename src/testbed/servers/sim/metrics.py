"""The simulator's counters and histograms, rendered in Prometheus text format.

Names follow vLLM's (``vllm:num_requests_running``, ``vllm:time_to_first_token_seconds`` …)
so that a probe scraping a real vLLM scrapes the simulator the same way. The server is a single
asyncio thread, so counters are plain attributes: no locks on the hot path. Histograms keep
per-bucket counts (bounded, mergeable) and are made cumulative only when rendered.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from testbed.servers.sim.kvcache import KvCache

_LATENCY_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
    2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
_TOKEN_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)


class Histogram:
    """A Prometheus histogram with fixed upper bounds (seconds or tokens)."""

    __slots__ = ("bounds", "count", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # last slot is +Inf
        self.count = 0
        self.sum = 0.0

    def observe(self, value: float, times: int = 1) -> None:
        """Record ``value`` ``times`` times (one call for a run of equal gaps)."""
        self.counts[bisect_left(self.bounds, value)] += times
        self.count += times
        self.sum += value * times

    def render(self, name: str, labels: str) -> list[str]:
        lines = [f"# TYPE {name} histogram"]
        running = 0
        for bound, n in zip(self.bounds, self.counts, strict=False):
            running += n
            lines.append(f'{name}_bucket{{{labels},le="{bound}"}} {running}')
        lines.append(f'{name}_bucket{{{labels},le="+Inf"}} {self.count}')
        lines.append(f"{name}_sum{{{labels}}} {self.sum}")
        lines.append(f"{name}_count{{{labels}}} {self.count}")
        return lines


class SimMetrics:
    """Everything ``/metrics`` reports; the app updates the attributes directly."""

    def __init__(self, model_name: str, not_played: tuple[str, ...] = ()) -> None:
        self.labels = f'model_name="{model_name}"'
        #: flags of the server this simulator stands in for that it does not play
        self.not_played = not_played
        self.running = 0
        self.waiting = 0
        self.prompt_tokens = 0
        self.kv: KvCache | None = None  # the app's KV cache, when it has one
        self.prefix_cache_queries = 0  # prompt tokens of admitted requests (with a KV cache)
        self.prefix_cache_hits = 0  # of which were cached
        self.generation_tokens = 0
        self.finished: Counter[str] = Counter()  # finish reason -> requests
        self.aborted = 0  # the client went away before the end
        self.rejected = 0  # queue full
        self.faults: Counter[str] = Counter()  # fault kind -> requests that got it
        self.ttft = Histogram(_LATENCY_BUCKETS)
        self.itl = Histogram(_LATENCY_BUCKETS)
        self.e2e = Histogram(_LATENCY_BUCKETS)
        self.queue_time = Histogram(_LATENCY_BUCKETS)
        self.request_prompt_tokens = Histogram(_TOKEN_BUCKETS)
        self.request_generation_tokens = Histogram(_TOKEN_BUCKETS)

    def render(self) -> str:
        """The Prometheus text exposition of every metric."""
        lab = self.labels
        lines: list[str] = []

        def scalar(kind: str, name: str, value: float, help_text: str) -> None:
            lines.extend(
                (f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f"{name}{{{lab}}} {value}")
            )

        scalar("gauge", "vllm:num_requests_running", self.running, "Requests being served.")
        scalar("gauge", "vllm:num_requests_waiting", self.waiting, "Requests queued.")
        usage = self.kv.usage if self.kv is not None else 0.0
        scalar("gauge", "vllm:kv_cache_usage_perc", usage, "KV-cache usage. 1 means 100 percent.")
        # Counters are exposed with _total, as prometheus_client does for vLLM's.
        scalar(
            "counter",
            "vllm:prefix_cache_queries_total",
            self.prefix_cache_queries,
            "Prefix cache queries, in terms of number of queried tokens.",
        )
        scalar(
            "counter",
            "vllm:prefix_cache_hits_total",
            self.prefix_cache_hits,
            "Prefix cache hits, in terms of number of cached tokens.",
        )
        scalar("counter", "vllm:prompt_tokens_total", self.prompt_tokens, "Prompt tokens.")
        scalar("counter", "vllm:generation_tokens_total", self.generation_tokens, "Output tokens.")
        lines.append("# TYPE vllm:request_success_total counter")
        for reason in sorted(self.finished):
            lines.append(
                f'vllm:request_success_total{{{lab},finished_reason="{reason}"}}'
                f" {self.finished[reason]}"
            )
        if self.not_played:  # an info metric, as vllm:cache_config_info: the labels say it
            flags = "; ".join(self.not_played).replace("\\", "\\\\").replace('"', '\\"')
            lines.append("# HELP testbed_sim:not_played_info Flags the stand-in does not play.")
            lines.append("# TYPE testbed_sim:not_played_info gauge")
            lines.append(f'testbed_sim:not_played_info{{{lab},flags="{flags}"}} 1')
        scalar("counter", "testbed_sim:requests_aborted_total", self.aborted, "Client left.")
        scalar("counter", "testbed_sim:requests_rejected_total", self.rejected, "Queue full.")
        lines.append("# TYPE testbed_sim:faults_total counter")
        for kind in sorted(self.faults):
            lines.append(f'testbed_sim:faults_total{{{lab},kind="{kind}"}} {self.faults[kind]}')
        for name, hist in (
            ("vllm:time_to_first_token_seconds", self.ttft),
            ("vllm:time_per_output_token_seconds", self.itl),
            ("vllm:e2e_request_latency_seconds", self.e2e),
            ("vllm:request_queue_time_seconds", self.queue_time),
            ("vllm:request_prompt_tokens", self.request_prompt_tokens),
            ("vllm:request_generation_tokens", self.request_generation_tokens),
        ):
            lines.extend(hist.render(name, lab))
        return "\n".join(lines) + "\n"
