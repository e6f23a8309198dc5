"""Pictures of a load treatment, written as PNGs into the treatment directory.

- ``latency_cdf.png``: TTFT, ITL and e2e CDFs, one line per stage;
- ``in_flight.png``: requests in flight over time, per stage;
- ``sweep.png`` (several stages): TTFT and ITL p50/p99 against achieved throughput.

matplotlib's object API with the Agg canvas: no pyplot, no global state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from testbed.results import metrics
from testbed.results.metrics import Record


def write_all(
    out_dir: Path, stage_records: Mapping[str, Sequence[Record]], summaries: Sequence[Any]
) -> list[str]:
    """Write every plot; the file names written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [latency_cdf(out_dir / "latency_cdf.png", stage_records)]
    written.append(in_flight(out_dir / "in_flight.png", stage_records))
    if len(summaries) > 1:
        written.append(sweep(out_dir / "sweep.png", summaries))
    return [path.name for path in written]


def _save(fig: Figure, path: Path) -> Path:
    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=110)
    return path


def latency_cdf(path: Path, stage_records: Mapping[str, Sequence[Record]]) -> Path:
    fig = Figure(figsize=(13, 4), layout="constrained")
    axes = fig.subplots(1, 3)
    for ax, label in zip(axes, ("TTFT (ms)", "ITL (ms)", "e2e latency (ms)"), strict=True):
        for name, records in stage_records.items():
            values = np.asarray(_values(label, records), dtype=np.float64)
            if values.size:
                # a CDF drawn through 1,000 quantiles looks the same and renders in a blink
                fractions = np.linspace(0, 1, min(values.size, 1000))
                ax.plot(np.quantile(values, fractions), fractions, label=name)
        ax.set_xlabel(label)
        ax.set_ylabel("fraction of requests" if label.startswith("TTFT") else "")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle("Latency CDFs")
    return _save(fig, path)


def _values(label: str, records: Sequence[Record]) -> list[float]:
    ok = [r for r in records if metrics.is_ok(r)]
    if label.startswith("ITL"):
        return [gap for r in ok for gap in metrics.itl_ms(r)]
    get = metrics.ttft_ms if label.startswith("TTFT") else metrics.e2e_ms
    return [v for r in ok if (v := get(r)) is not None]


def in_flight(path: Path, stage_records: Mapping[str, Sequence[Record]]) -> Path:
    fig = Figure(figsize=(9, 3.5), layout="constrained")
    ax = fig.subplots()
    origin = None
    for name, records in stage_records.items():
        series = metrics.in_flight(records, step_ns=50_000_000)
        if not series:
            continue
        origin = series[0][0] if origin is None else origin
        ax.step([(t - origin) / 1e9 for t, _ in series], [n for _, n in series], label=name)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("requests in flight")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, path)


def sweep(path: Path, summaries: Sequence[Mapping[str, Any]]) -> Path:
    fig = Figure(figsize=(10, 4), layout="constrained")
    axes = fig.subplots(1, 2)
    points = sorted(summaries, key=lambda s: s["throughput"]["requests_per_s"])
    x = [s["throughput"]["requests_per_s"] for s in points]
    for ax, metric in zip(axes, ("ttft_ms", "itl_ms"), strict=True):
        for quantile in ("p50", "p99"):
            ax.plot(x, [s[metric][quantile] for s in points], marker="o", label=quantile)
        ax.set_xlabel("throughput (requests/s)")
        ax.set_ylabel(metric.replace("_ms", " (ms)").upper())
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle("Latency against throughput across the sweep")
    return _save(fig, path)
