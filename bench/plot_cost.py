"""CPU per picture of a load treatment: testbed's fixed-margin panels against matplotlib's
constrained layout (what they replaced), drawn in the same run from the same records.

Every load treatment draws its latency CDFs and its time series as PNG files, and the HTML
report draws them again as SVG (with the server-metrics figure); this is the CPU each costs.
The records are synthetic (``--requests`` requests of ``--tokens`` tokens, concurrency 4,
seeded): only their count matters to the pictures' cost. Each figure is drawn ``--repeat``
times after one warm-up draw; the lowest CPU time (``process_time``) is printed.

    .venv/bin/python bench/plot_cost.py [--requests 500] [--tokens 64] [--repeat 5]
"""

from __future__ import annotations

import argparse
import io
import random
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.backends.backend_svg import FigureCanvasSVG
from matplotlib.figure import Figure

from testbed.probes import figures
from testbed.probes.load import plots
from testbed.probes.server_metrics import plots as server_plots


def records(requests: int, tokens: int, seed: int = 1) -> list[dict[str, Any]]:
    """``requests`` streamed requests, four at a time, with jittered TTFT and ITL."""
    rng = random.Random(seed)
    lanes = [0] * 4
    out = []
    for n in range(requests):
        lane = n % 4
        sent = lanes[lane] + rng.randint(0, 200_000)
        t = sent + int(rng.gauss(25e6, 3e6))
        chunks = []
        for _ in range(tokens):
            t += max(1, int(rng.gauss(8e6, 1e6)))
            chunks.append(t)
        lanes[lane] = t
        out.append(
            {
                "stage": "s",
                "n": n,
                "sent_ns": sent,
                "chunks_ns": chunks,
                "done_ns": t,
                "error": None,
                "output_tokens": tokens,
            }
        )
    return out


def samples(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Server-metrics samples every 0.5 s over the records' span."""
    end = max(r["done_ns"] for r in records)
    return [
        {
            "deployment": "sim",
            "t_ns": t,
            "running": 4,
            "waiting": 0,
            "kv_cache_usage": 0.3,
            "generation_tokens": t // 10_000_000,
        }
        for t in range(0, end, 500_000_000)
    ]


def constrained(
    width: float, height: float, rows: int, cols: int
) -> tuple[Figure, npt.NDArray[Any]]:
    """The layout the panels replaced: matplotlib's constrained layout."""
    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, np.asarray(fig.subplots(rows, cols, sharex=cols == 1)).ravel()


def use(layout: Callable[[float, float, int, int], tuple[Figure, npt.NDArray[Any]]]) -> None:
    """Draw the load and server-metrics pictures on ``layout``."""
    for module in (plots, server_plots):
        vars(module)["panels"] = layout


def cpu_ms(draw: Callable[[], Figure], svg: bool, repeat: int) -> float:
    best = float("inf")
    for i in range(repeat + 1):
        started = time.process_time()
        fig = draw()
        if svg:
            FigureCanvasSVG(fig).print_svg(io.StringIO())  # type: ignore[no-untyped-call]
        else:
            FigureCanvasAgg(fig)
            fig.savefig(io.BytesIO(), format="png", dpi=110)
        if i:  # the first draw warms font caches
            best = min(best, (time.process_time() - started) * 1000)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    recs = records(args.requests, args.tokens)
    metric_samples = samples(recs)
    pictures: dict[str, Callable[[], Figure]] = {
        "latency CDFs": lambda: plots.latency_cdfs({"s": recs}),
        "time series": lambda: plots.time_series(recs),
        "server metrics": lambda: server_plots.figure(metric_samples, recs, 0.5),
    }
    print(f"{args.requests} requests of {args.tokens} tokens; lowest of {args.repeat} draws")
    print(f"{'figure':16} {'as':4} {'fixed ms':>9} {'constrained ms':>15} {'ratio':>6}")
    fixed = figures.panels
    total = {"fixed": 0.0, "constrained": 0.0}
    for name, draw in pictures.items():
        for svg in (False, True):
            use(fixed)
            ours = cpu_ms(draw, svg, args.repeat)
            use(constrained)
            theirs = cpu_ms(draw, svg, args.repeat)
            total["fixed"] += ours
            total["constrained"] += theirs
            kind = "SVG" if svg else "PNG"
            print(f"{name:16} {kind:4} {ours:9.0f} {theirs:15.0f} {theirs / ours:5.1f}x")
    use(fixed)
    ratio = total["constrained"] / total["fixed"]
    print(f"{'all six':21} {total['fixed']:9.0f} {total['constrained']:15.0f} {ratio:5.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
