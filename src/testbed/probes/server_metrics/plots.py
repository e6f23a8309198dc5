"""The server's side over time, on the client's time axis (seconds since the first request).

One figure, one line per deployment: requests running and waiting as the server reports
them, the KV-cache usage (when the server exposes it), and output tokens per second as the
server counted them (the counter's increase between consecutive samples) beside the
client's count (each request's output tokens at its end, in bins of the sampling interval).
Samples and records share ``CLOCK_MONOTONIC``, so the axes line up without adjustment.
matplotlib's object API: the probe saves it as a PNG, the HTML report inlines it as SVG.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.figure import Figure

from testbed.probes.figures import panels

Sample = Mapping[str, Any]


def origin_of(samples: Sequence[Sample], records: Sequence[Mapping[str, Any]]) -> int:
    """Time zero: the first request sent, else the first sample."""
    sent = [int(r["sent_ns"]) for r in records if r.get("sent_ns") is not None]
    return min(sent) if sent else min(int(s["t_ns"]) for s in samples)


def _server_rate(samples: Sequence[Sample], origin: int) -> list[tuple[float, float]]:
    points = [(int(s["t_ns"]), float(s["generation_tokens"])) for s in samples
              if s.get("generation_tokens") is not None]  # fmt: skip
    return [
        ((b[0] - origin) / 1e9, (b[1] - a[1]) / ((b[0] - a[0]) / 1e9))
        for a, b in itertools.pairwise(points)
        if b[0] > a[0] and b[1] >= a[1]
    ]


def _client_rate(
    records: Sequence[Mapping[str, Any]], origin: int, step_ns: int
) -> list[tuple[float, float]]:
    bins: dict[int, float] = {}
    for r in records:
        if r.get("done_ns") and r.get("output_tokens"):
            slot = (int(r["done_ns"]) - origin) // step_ns
            bins[slot] = bins.get(slot, 0.0) + float(r["output_tokens"])
    if not bins:
        return []
    return [
        ((i + 1) * step_ns / 1e9, bins.get(i, 0.0) / (step_ns / 1e9)) for i in range(max(bins) + 1)
    ]


def figure(
    samples: Sequence[Sample],
    records: Sequence[Mapping[str, Any]],
    interval_s: float,
    window_ns: tuple[int, int] | None = None,
) -> Figure:
    """The server metrics figure; ``samples`` must hold at least one successful sample."""
    ok = [s for s in samples if not s.get("error")]
    origin = origin_of(ok, records)
    names = list(dict.fromkeys(str(s["deployment"]) for s in ok))
    has_kv = any(s.get("kv_cache_usage") is not None for s in ok)
    rows = 3 if has_kv else 2
    fig, panes = panels(10, 2.2 * rows + 0.6, rows, 1)
    axes = list(panes)
    for name in names:
        mine = [s for s in ok if s["deployment"] == name]
        t = [(int(s["t_ns"]) - origin) / 1e9 for s in mine]
        for key, style in (("running", "-"), ("waiting", "--")):
            values = [s.get(key) for s in mine]
            if any(v is not None for v in values):
                axes[0].step(t, values, style, where="post", label=f"{name} {key}")
        if has_kv:
            kv = [s.get("kv_cache_usage") for s in mine]
            kv_pct = [None if v is None else 100 * v for v in kv]
            axes[1].plot(t, kv_pct, "-", label=name)
        rate = _server_rate(mine, origin)
        if rate:
            axes[-1].step([x for x, _ in rate], [y for _, y in rate], where="pre",
                          label=f"{name} server")  # fmt: skip
        client = _client_rate([r for r in records if r.get("deployment", name) == name], origin,
                              max(10_000_000, round(interval_s * 1e9)))  # fmt: skip
        if client:
            axes[-1].step([x for x, _ in client], [y for _, y in client], ":", where="pre",
                          label=f"{name} client")  # fmt: skip
    axes[0].set_ylabel("requests")
    if has_kv:
        axes[1].set_ylabel("KV cache used (%)")
    axes[-1].set_ylabel("output tokens / s")
    axes[-1].set_xlabel("time since the first request (s)")
    for ax in axes:
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
        if window_ns is not None:
            start, end = ((edge - origin) / 1e9 for edge in window_ns)
            ax.axvspan(start, end, color="tab:green", alpha=0.08)
    fig.suptitle(f"Server metrics (scraped every {interval_s:g} s)")
    return fig
