"""Reading a server's Prometheus ``/metrics`` into a few server-neutral numbers.

:func:`scrape` fetches the text exposition over the lean HTTP client and :func:`parse`
reads it with ``prometheus-client``'s own text parser. Each server kind names the same facts
differently; :data:`SOURCES` maps every known name onto one of the :data:`FIELDS`:

- ``running``: ``vllm:num_requests_running``; TGI/TGIS ``tgi_batch_current_size``;
- ``waiting``: ``vllm:num_requests_waiting``; TGI/TGIS ``tgi_queue_size``;
- ``kv_cache_usage`` (a fraction 0..1): ``vllm:kv_cache_usage_perc`` (older vLLM:
  ``vllm:gpu_cache_usage_perc``); TGI has none;
- ``prompt_tokens`` (a counter): ``vllm:prompt_tokens_total``; TGI/TGIS the sum of the
  ``tgi_request_input_length`` histogram;
- ``generation_tokens`` (a counter): ``vllm:generation_tokens_total``; TGI/TGIS the sum of
  the ``tgi_request_generated_tokens`` histogram.
- ``prefix_cache_queries`` / ``prefix_cache_hits`` (counters, in prompt tokens looked up /
  found in the prefix cache): ``vllm:prefix_cache_queries_total`` /
  ``vllm:prefix_cache_hits_total`` (vLLM 0.8's V1: ``vllm:gpu_prefix_cache_…``); TGI has none.

A page may also say what a stand-in does not play (:func:`not_played`: the ``flags`` label of
``testbed_sim:not_played_info``, which the emulator's vLLM stand-in sets).

testbed's simulator and reference server use vLLM's names.

Samples of one name with several label sets (one per model or engine) are summed. Lines of
other metrics are dropped before parsing: a vLLM page holds hundreds of histogram buckets,
and parsing only the handful we read keeps a scrape's CPU cost small.
"""

from __future__ import annotations

from testbed.clients.http import ConnectionPool, StatusSink

#: The server-neutral fields a scrape yields (None when the server exposes no such metric).
FIELDS = (
    "running",
    "waiting",
    "kv_cache_usage",
    "prompt_tokens",
    "generation_tokens",
    "prefix_cache_queries",
    "prefix_cache_hits",
)

#: Sample name → field, first match wins within a field (the order of the tuples).
SOURCES: dict[str, tuple[str, ...]] = {
    "running": ("vllm:num_requests_running", "tgi_batch_current_size"),
    "waiting": ("vllm:num_requests_waiting", "tgi_queue_size"),
    "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    "prompt_tokens": ("vllm:prompt_tokens_total", "tgi_request_input_length_sum"),
    "generation_tokens": ("vllm:generation_tokens_total", "tgi_request_generated_tokens_sum"),
    "prefix_cache_queries": (
        "vllm:prefix_cache_queries_total",
        "vllm:gpu_prefix_cache_queries_total",
    ),
    "prefix_cache_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
}
_WANTED = {name for names in SOURCES.values() for name in names}
#: The fields that are counters (only differences between two scrapes mean anything).
COUNTERS = ("prompt_tokens", "generation_tokens", "prefix_cache_queries", "prefix_cache_hits")
NOT_PLAYED = "testbed_sim:not_played_info"


class MetricsError(Exception):
    """The metrics page could not be read (HTTP error, or not the Prometheus text format)."""


def _sample_name(line: str) -> str:
    end = len(line)
    for stop in ("{", " "):
        found = line.find(stop)
        if 0 <= found < end:
            end = found
    return line[:end]


def parse(text: str) -> dict[str, float | None]:
    """The :data:`FIELDS` of one exposition text (``prometheus-client``'s parser)."""
    from prometheus_client.parser import text_string_to_metric_families

    kept = "\n".join(
        line
        for line in text.splitlines()
        if line and line[0] != "#" and _sample_name(line) in _WANTED
    )
    sums: dict[str, float] = {}
    try:
        for family in text_string_to_metric_families(kept + "\n"):
            for sample in family.samples:
                sums[sample.name] = sums.get(sample.name, 0.0) + float(sample.value)
    except ValueError as exc:
        raise MetricsError(f"not the Prometheus text format: {exc}") from exc
    out: dict[str, float | None] = {}
    for field, names in SOURCES.items():
        out[field] = next((sums[name] for name in names if name in sums), None)
    return out


def not_played(text: str) -> str | None:
    """The flags a stand-in says it does not play (the label of :data:`NOT_PLAYED`), or None."""
    from prometheus_client.parser import text_string_to_metric_families

    lines = [line for line in text.splitlines() if line.startswith(NOT_PLAYED + "{")]
    if not lines:
        return None
    try:
        families = list(text_string_to_metric_families("\n".join(lines) + "\n"))
    except ValueError as exc:
        raise MetricsError(f"not the Prometheus text format: {exc}") from exc
    flags = [s.labels.get("flags", "") for f in families for s in f.samples]
    return "; ".join(f for f in flags if f) or None


class _TextSink(StatusSink):
    """Collects one whole response body, and why it was cut if it was."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.cut: str | None = None

    def on_data(self, data: bytes, t_ns: int) -> None:
        del t_ns
        self.parts.append(data)

    def on_cut(self, reason: str, t_ns: int) -> None:
        del t_ns
        self.cut = reason


async def scrape(
    pool: ConnectionPool, path: str, timeout_s: float = 5.0
) -> tuple[dict[str, float | None], str | None]:
    """GET ``path``: its :func:`parse` and its :func:`not_played`; raises :class:`MetricsError`
    on a non-2xx answer (connection failures raise the client's ``HttpClientError``)."""
    sink = _TextSink()
    await pool.send(pool.encode("GET", path), sink, timeout_s)
    if not 200 <= sink.status < 300:
        raise MetricsError(f"GET {path} answered HTTP {sink.status}")
    if sink.cut is not None:  # a part of the counters would read as their values
        raise MetricsError(f"GET {path}: the body was cut short ({sink.cut})")
    text = b"".join(sink.parts).decode("utf-8", "replace")
    return parse(text), not_played(text)
