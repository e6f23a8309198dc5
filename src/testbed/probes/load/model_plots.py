"""The picture and the terminal table of a load over several models or LoRA adapters: each
model's TTFT (p50 bar, p99 tick above it) and its figures side by side, from the stage
summary's ``models`` (:func:`testbed.probes.load.summary.per_model`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from rich.table import Table

from testbed.probes.figures import panels

FILE = "ttft_by_model.png"


def ttft_by_model(models: Mapping[str, Mapping[str, Any]], title: str) -> Figure:
    """One bar per model: its TTFT p50, with its p99 as a tick above (a model whose every
    request failed has no bar, and says so)."""
    fig, (ax,) = panels(max(4.0, 1.1 * len(models) + 1.6), 3.4, 1, 1)
    names = list(models)
    p50 = [models[n]["ttft_ms"]["p50"] for n in names]
    p99 = [models[n]["ttft_ms"]["p99"] for n in names]
    xs = range(len(names))
    ax.bar(xs, [v or 0.0 for v in p50], width=0.6, label="p50")
    ticks = [(x, v) for x, v in zip(xs, p99, strict=True) if v is not None]
    ax.scatter([x for x, _ in ticks], [v for _, v in ticks], marker="_", s=400, c="k",
               label="p99")  # fmt: skip
    for x, value in zip(xs, p50, strict=True):
        if value is None:
            ax.text(x, 0, "no answer", ha="center", va="bottom", fontsize="small")
    ax.set_xticks(list(xs), names)
    ax.set_ylabel("TTFT (ms)")
    ax.set_ylim(bottom=0)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize="small")
    fig.suptitle(title)
    return fig


def write(out_dir: Path, summaries: Sequence[Mapping[str, Any]]) -> list[str]:
    """The PNG of the last stage that has per-model figures (none: nothing written)."""
    staged = [s for s in summaries if s.get("models")]
    if not staged:
        return []
    stage = staged[-1]
    fig = ttft_by_model(stage["models"], f"TTFT by model · {stage['stage']}")
    FigureCanvasAgg(fig)
    fig.savefig(out_dir / FILE, dpi=110)
    return [FILE]


def _f(value: Any, digits: int) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def table(summary: Mapping[str, Any]) -> Table | None:
    """The headline stage's rows per model, or None for a load over one model."""
    models = summary.get("models")
    if not models:
        return None
    out = Table(title=f"by model · {summary.get('stage')}")
    for name in ("model", "requests", "req/s", "TTFT p50", "TTFT p99", "ITL p50", "e2e p99"):
        out.add_column(name, justify="left" if name == "model" else "right")
    for name, m in models.items():
        out.add_row(
            name,
            f"{m['requests']['ok']}/{m['requests']['total']}",
            _f(m["throughput"]["requests_per_s"], 1),
            _f(m["ttft_ms"]["p50"], 2),
            _f(m["ttft_ms"]["p99"], 2),
            _f(m["itl_ms"]["p50"], 2),
            _f(m["e2e_ms"]["p99"], 1),
        )
    return out
