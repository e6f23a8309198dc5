"""Plots of the HTML report as inline SVG, drawn with matplotlib's object API on the SVG
canvas (no pyplot, no global state, no files, nothing fetched when the page is opened).

Each function takes plain numbers (computed by the caller from records with
:mod:`testbed.results.metrics`) and returns one ``<svg>`` element. Element ids inside each
SVG get a per-figure prefix: several figures share one HTML document, and matplotlib's ids
(clip paths, glyphs) would otherwise collide.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib import rc_context
from matplotlib.backends.backend_svg import FigureCanvasSVG
from matplotlib.figure import Figure

#: A CDF line keeps at most this many points (quantiles): the SVG stays small.
CDF_POINTS = 400
LATENCY_LABELS = {
    "ttft_ms": "TTFT (ms)",
    "itl_ms": "ITL (ms)",
    "tpot_ms": "TPOT (ms)",
    "e2e_ms": "e2e latency (ms)",
}
_ID = re.compile(r'\bid="([^"]+)"')
_REF = re.compile(r'(url\(#|href="#)([^)"]+)')
_SIZE = re.compile(r'\s(width|height)="[^"]*"')


def to_svg(fig: Figure, key: str, title: str) -> str:
    """``fig`` as an inline ``<svg>`` whose ids start with ``key``."""
    buffer = io.StringIO()
    with rc_context({"svg.hashsalt": key, "svg.fonttype": "path"}):
        FigureCanvasSVG(fig).print_svg(  # type: ignore[no-untyped-call]
            buffer, metadata={"Date": None, "Creator": None}
        )
    text = buffer.getvalue()
    text = text[text.index("<svg") :]
    text = _ID.sub(lambda m: f'id="{key}-{m.group(1)}"', text)
    text = _REF.sub(lambda m: f"{m.group(1)}{key}-{m.group(2)}", text)
    head_end = text.index(">")
    head = _SIZE.sub("", text[:head_end])
    return f'{head} class="plot" role="img" aria-label="{title}"{text[head_end:]}'


def _cdf(values: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    data = np.sort(np.asarray(values, dtype=np.float64))
    if data.size <= CDF_POINTS:
        return data, np.arange(1, data.size + 1) / data.size
    fractions = np.linspace(0.0, 1.0, CDF_POINTS)
    return np.quantile(data, fractions), fractions


def latency_cdfs(key: str, series: Mapping[str, Mapping[str, Sequence[float]]]) -> str:
    """CDFs of TTFT, ITL, TPOT and e2e: one panel each, one line per label of ``series``
    (label → metric name → values)."""
    fig = Figure(figsize=(10, 6.5), layout="constrained")
    axes = fig.subplots(2, 2).ravel()
    for ax, (metric, label) in zip(axes, LATENCY_LABELS.items(), strict=True):
        for name, values in series.items():
            points = values.get(metric) or []
            if len(points):
                x, y = _cdf(points)
                ax.plot(x, y, label=name, linewidth=1.2)
        ax.set_xlabel(label)
        ax.set_ylabel("fraction")
        ax.set_ylim(0, 1.01)
        ax.grid(alpha=0.3)
    if len(series) <= 12:
        axes[0].legend(fontsize=7, loc="lower right")
    fig.suptitle("Latency CDFs")
    return to_svg(fig, key, "latency CDFs")


def latency_vs_throughput(
    key: str, lines: Mapping[str, Sequence[Mapping[str, float | None]]], title: str
) -> str:
    """TTFT and ITL (p50 and p99) against achieved requests/s, one line per label; each
    point a mapping with ``rps`` and ``ttft_ms.p50`` … ``itl_ms.p99``."""
    fig = Figure(figsize=(10, 4), layout="constrained")
    axes = fig.subplots(1, 2)
    for ax, metric in zip(axes, ("ttft_ms", "itl_ms"), strict=True):
        for name, points in lines.items():
            ordered = sorted(
                (p for p in points if p.get("rps") is not None), key=lambda p: p["rps"] or 0.0
            )
            x = [p["rps"] for p in ordered]
            for quantile, style in (("p50", "-o"), ("p99", "--s")):
                y = [p.get(f"{metric}.{quantile}") for p in ordered]
                ys = [np.nan if v is None else v for v in y]
                ax.plot(x, ys, style, markersize=4, label=f"{name} {quantile}")
        ax.set_xlabel("throughput (requests/s)")
        ax.set_ylabel(LATENCY_LABELS[metric])
        ax.grid(alpha=0.3)
        if sum(len(v) > 0 for v in lines.values()) <= 6:
            ax.legend(fontsize=7)
    fig.suptitle(title)
    return to_svg(fig, key, title)


def time_series(
    key: str,
    in_flight: Sequence[tuple[float, int]],
    completions: Sequence[tuple[float, float]],
    ttft: Sequence[tuple[float, float]],
    window: tuple[float, float] | None,
) -> str:
    """Requests in flight, completions per second and each request's TTFT (at its send
    time) over the treatment's time, seconds from its first request; the steady-state
    window shaded."""
    fig = Figure(figsize=(10, 6), layout="constrained")
    axes = fig.subplots(3, 1, sharex=True)
    if in_flight:
        axes[0].step([t for t, _ in in_flight], [n for _, n in in_flight], where="post")
    axes[0].set_ylabel("in flight")
    if completions:
        axes[1].plot([t for t, _ in completions], [r for _, r in completions], "-")
    axes[1].set_ylabel("completed / s")
    if ttft:
        axes[2].plot([t for t, _ in ttft], [v for _, v in ttft], ".", markersize=2)
    axes[2].set_ylabel("TTFT (ms)")
    axes[2].set_xlabel("time since the first request (s)")
    for ax in axes:
        ax.grid(alpha=0.3)
        if window is not None:
            ax.axvspan(window[0], window[1], color="tab:green", alpha=0.08)
    fig.suptitle("Over time" + (" (shaded: steady-state window)" if window else ""))
    return to_svg(fig, key, "time series")
