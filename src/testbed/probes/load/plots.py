"""Pictures of a load treatment: the one place they are drawn.

Each figure is built from records and stage summaries with the formulas of
:mod:`testbed.results.metrics`, and returned as a matplotlib ``Figure`` (object API: no
pyplot, no global state). Two places show them:

- the load probe writes PNGs into the treatment directory (:func:`write_all`):
  ``latency_cdf.png``, ``time_series.png`` and, for several stages, ``sweep.png``;
- the HTML report renders the same figures as inline SVG (``report.plots.to_svg``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from testbed.probes.figures import panels
from testbed.results import metrics
from testbed.results.metrics import Record

#: A CDF line keeps at most this many points (quantiles): the picture looks the same, and
#: an SVG of it stays small.
CDF_POINTS = 400
LATENCY_LABELS = {
    "ttft_ms": "TTFT (ms)",
    "itl_ms": "ITL (ms)",
    "tpot_ms": "TPOT (ms)",
    "e2e_ms": "e2e latency (ms)",
}


def write_all(
    out_dir: Path,
    stage_records: Mapping[str, Sequence[Record]],
    summaries: Sequence[Mapping[str, Any]],
) -> list[str]:
    """Write the PNGs of a load treatment; the file names written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    ok = {name: [r for r in records if metrics.is_ok(r)] for name, records in stage_records.items()}
    figures = {"latency_cdf.png": latency_cdfs(ok)}
    every = [r for records in stage_records.values() for r in records if r.get("sent_ns")]
    if every:
        figures["time_series.png"] = time_series(every)
    if len(summaries) > 1:
        figures["sweep.png"] = latency_vs_throughput({"sweep": summaries}, "Sweep")
    turned = [s for s in summaries if s.get("by_turn")]
    if turned:  # a multi-turn load
        from testbed.probes.load.turn_plots import ttft_by_turn

        lines = {str(s["stage"]): s["by_turn"] for s in turned}
        figures["ttft_by_turn.png"] = ttft_by_turn(lines, "TTFT by turn")
    for name, fig in figures.items():
        FigureCanvasAgg(fig)
        fig.savefig(out_dir / name, dpi=110)
    return list(figures)


def latency_values(records: Sequence[Record]) -> dict[str, list[float]]:
    """TTFT, ITL, TPOT and e2e of ``records``, in ms, by metric name."""
    return {
        "ttft_ms": [v for r in records if (v := metrics.ttft_ms(r)) is not None],
        "itl_ms": [gap for r in records for gap in metrics.itl_ms(r)],
        "tpot_ms": [v for r in records if (v := metrics.tpot_ms(r)) is not None],
        "e2e_ms": [v for r in records if (v := metrics.e2e_ms(r)) is not None],
    }


def _cdf(
    values: Sequence[float],
) -> tuple[npt.NDArray[np.floating[Any]], npt.NDArray[np.floating[Any]]]:
    data = np.sort(np.asarray(values, dtype=np.float64))
    if data.size <= CDF_POINTS:
        return data, np.arange(1, data.size + 1) / data.size
    fractions = np.linspace(0.0, 1.0, CDF_POINTS)
    return np.quantile(data, fractions), fractions


def latency_cdfs(populations: Mapping[str, Sequence[Record]]) -> Figure:
    """CDFs of TTFT, ITL, TPOT and e2e: one panel each, one line per label of
    ``populations`` (label → the records behind it)."""
    fig, axes = panels(10, 6.5, 2, 2)
    series = {name: latency_values(records) for name, records in populations.items()}
    for ax, (metric, label) in zip(axes, LATENCY_LABELS.items(), strict=True):
        for name, values in series.items():
            points = values[metric]
            if points:
                x, y = _cdf(points)
                ax.plot(x, y, label=name, linewidth=1.2)
        ax.set_xlabel(label)
        ax.set_ylabel("fraction")
        ax.set_ylim(0, 1.01)
        ax.grid(alpha=0.3)
    if len(series) <= 12:
        axes[0].legend(fontsize=7, loc="lower right")
    fig.suptitle("Latency CDFs")
    return fig


def _point(summary: Mapping[str, Any]) -> dict[str, float | None]:
    """A stage (or treatment) summary as one point: requests/s and the latency quantiles."""
    point: dict[str, float | None] = {
        "rps": (summary.get("throughput") or {}).get("requests_per_s")
    }
    for metric in ("ttft_ms", "itl_ms"):
        for q in ("p50", "p99"):
            point[f"{metric}.{q}"] = (summary.get(metric) or {}).get(q)
    return point


def latency_vs_throughput(lines: Mapping[str, Sequence[Mapping[str, Any]]], title: str) -> Figure:
    """TTFT and ITL (p50 and p99) against achieved requests/s, one line per label; each
    line drawn through the summaries (of stages or treatments) it is given."""
    fig, axes = panels(10, 4, 1, 2)
    for ax, metric in zip(axes, ("ttft_ms", "itl_ms"), strict=True):
        for name, summaries in lines.items():
            points = [p for p in map(_point, summaries) if p["rps"] is not None]
            ordered = sorted(points, key=lambda p: p["rps"] or 0.0)
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
    return fig


def time_series(records: Sequence[Record], window_ns: tuple[int, int] | None = None) -> Figure:
    """Requests in flight, completions per second and each request's TTFT (at its send
    time) over the treatment's time, seconds from its first request; ``window_ns`` (the
    steady-state window) shaded. ``records`` must hold at least one sent request."""
    origin = min(r["sent_ns"] for r in records if r.get("sent_ns") is not None)
    span = max((r.get("done_ns") or r.get("failed_ns") or origin) for r in records) - origin
    step = max(10_000_000, span // 300)  # ≤ ~300 samples whatever the length
    flight = [((t - origin) / 1e9, n) for t, n in metrics.in_flight(records, step_ns=step)]
    done = sorted(r["done_ns"] for r in records if metrics.is_ok(r) and r.get("done_ns"))
    # completions are counted in coarser bins: at 10 ms a bin holds 0 or 1 of them
    completions = _rate_series(done, origin, max(100_000_000, span // 60))
    ttft = [
        ((r["sent_ns"] - origin) / 1e9, v)
        for r in records
        if r.get("sent_ns") is not None and (v := metrics.ttft_ms(r)) is not None
    ]
    fig, axes = panels(10, 6, 3, 1)
    if flight:
        axes[0].step([t for t, _ in flight], [n for _, n in flight], where="post")
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
        if window_ns is not None:
            start, end = ((edge - origin) / 1e9 for edge in window_ns)
            ax.axvspan(start, end, color="tab:green", alpha=0.08)
    fig.suptitle("Over time" + (" (shaded: steady-state window)" if window_ns else ""))
    return fig


def _rate_series(times_ns: Sequence[int], origin: int, step_ns: int) -> list[tuple[float, float]]:
    """Events per second in consecutive bins of ``step_ns``."""
    if not times_ns:
        return []
    bins: dict[int, int] = {}
    for t in times_ns:
        bins[(t - origin) // step_ns] = bins.get((t - origin) // step_ns, 0) + 1
    last = max(bins)
    return [((i + 0.5) * step_ns / 1e9, bins.get(i, 0) / (step_ns / 1e9)) for i in range(last + 1)]
