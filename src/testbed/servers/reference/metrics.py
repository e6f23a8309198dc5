"""``/metrics`` of the reference server, with vLLM's metric names so one scraper reads both.

Counters and fixed-bucket histograms, rendered in the Prometheus text format. Written by
the engine thread, read by the event loop: a torn read of a plain int is harmless here.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any

_LATENCY_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip


_BATCH_BUCKETS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0)


@dataclass
class Histogram:
    """Cumulative-on-render buckets of seconds, like prometheus_client's."""

    buckets: tuple[float, ...] = _LATENCY_BUCKETS
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def observe(self, value: float) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.buckets) + 1)
        self.counts[bisect_left(self.buckets, value)] += 1
        self.total += value
        self.count += 1

    def render(self, name: str, labels: str) -> list[str]:
        counts = self.counts or [0] * (len(self.buckets) + 1)
        lines, running = [], 0
        for bound, n in zip((*self.buckets, float("inf")), counts, strict=True):
            running += n
            le = "+Inf" if bound == float("inf") else repr(bound)
            lines.append(f'{name}_bucket{{{labels},le="{le}"}} {running}')
        lines.append(f"{name}_sum{{{labels}}} {self.total}")
        lines.append(f"{name}_count{{{labels}}} {self.count}")
        return lines


@dataclass
class EngineMetrics:
    model: str
    running: int = 0
    waiting: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    kv_tokens: int = 0  # tokens held in the KV caches of the running requests
    kv_capacity: int = 0  # what max_batch requests of max_len tokens would hold
    finished: dict[str, int] = field(default_factory=dict)
    ttft: Histogram = field(default_factory=Histogram)
    e2e: Histogram = field(default_factory=Histogram)
    tpot: Histogram = field(default_factory=Histogram)
    batch: Histogram = field(default_factory=lambda: Histogram(_BATCH_BUCKETS))

    def observe_first_token(self, elapsed_ns: int) -> None:
        self.ttft.observe(elapsed_ns / 1e9)

    def observe_finished(self, seq: Any, reason: str, now_ns: int) -> None:
        """``seq`` is the engine's request record (arrival, first token, tokens generated)."""
        self.finished[reason] = self.finished.get(reason, 0) + 1
        self.e2e.observe((now_ns - seq.arrival_ns) / 1e9)
        if len(seq.generated) > 1:
            self.tpot.observe((now_ns - seq.first_token_ns) / 1e9 / (len(seq.generated) - 1))

    def kv_usage(self) -> float:
        """Fraction of the KV capacity in use (vLLM's ``kv_cache_usage_perc``, 0..1)."""
        return self.kv_tokens / self.kv_capacity if self.kv_capacity else 0.0

    def render(self) -> str:
        labels = f'model_name="{self.model}"'
        lines = [
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running{{{labels}}} {self.running}",
            "# TYPE vllm:num_requests_waiting gauge",
            f"vllm:num_requests_waiting{{{labels}}} {self.waiting}",
            "# TYPE vllm:kv_cache_usage_perc gauge",
            f"vllm:kv_cache_usage_perc{{{labels}}} {self.kv_usage()}",
            "# TYPE vllm:prompt_tokens_total counter",
            f"vllm:prompt_tokens_total{{{labels}}} {self.prompt_tokens}",
            "# TYPE vllm:generation_tokens_total counter",
            f"vllm:generation_tokens_total{{{labels}}} {self.generation_tokens}",
            "# TYPE vllm:request_success_total counter",
        ]
        for reason, n in sorted(self.finished.items()):
            lines.append(f'vllm:request_success_total{{{labels},finished_reason="{reason}"}} {n}')
        for name, hist in (
            ("vllm:time_to_first_token_seconds", self.ttft),
            ("vllm:e2e_request_latency_seconds", self.e2e),
            ("vllm:time_per_output_token_seconds", self.tpot),
            ("testbed:decode_batch_size", self.batch),  # rows per decode step (ours only)
        ):
            lines.append(f"# TYPE {name} histogram")
            lines.extend(hist.render(name, labels))
        return "\n".join(lines) + "\n"
