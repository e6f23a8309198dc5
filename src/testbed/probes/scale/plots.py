"""The seed's report picture: one row per stage, its delta over submission time on the left
and its histogram on the right.

``general.png`` shows the coarse stages (submitted → created → scheduled → running →
completed); ``detailed.png`` every stage the cluster reported. Workloads still waiting are
drawn as hollow triangles at the wait so far (censored, so the true delta is larger);
workloads in error as red crosses, workloads a pod of which was preempted ringed in purple.
With gangs (several pods per workload), ``detailed.png`` adds a row ``first_scheduled →
scheduled``: from the gang's first pod bound to its last. Each histogram's title gives the
Kaplan–Meier p50 and p99.
matplotlib's object API with the Agg canvas: no pyplot, no global state.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from testbed.config.scale import GENERAL_STAGES, STAGES
from testbed.probes.scale.times import Row, origin_ms
from testbed.probes.scale.verdict import interval_survival


def chain(table: Sequence[Row], kind: str) -> list[str]:
    """The stages of a ``general`` or ``detailed`` plot that at least one workload reached."""
    wanted = GENERAL_STAGES if kind == "general" else STAGES
    return [s for s in wanted if any(s in r.stages for r in table)]


GANG = "gang.first_scheduled"
PREEMPTED = "event.Pod.Preempted"


def with_gang(table: Sequence[Row]) -> tuple[list[Row], list[tuple[str, str]]]:
    """Rows whose first pod's scheduling is a stage of its own, and the detailed plot's extra
    row ``first_scheduled → scheduled`` (how long a gang waited for its last member), when
    some workload has several pods."""
    if not any(GANG in r.extra for r in table):
        return list(table), []
    rows = [
        dataclasses.replace(r, stages={**r.stages, "first_scheduled": r.extra[GANG]})
        if GANG in r.extra
        else r
        for r in table
    ]
    return rows, [("first_scheduled", "scheduled")]


def write(path: Path, table: Sequence[Row], until_ms: float, kind: str) -> Path:
    """Draw the plot of ``kind`` for ``table`` into ``path`` (a PNG)."""
    stages = chain(table, kind)
    pairs = list(itertools.pairwise(stages))
    if kind == "detailed":
        table, gang = with_gang(table)
        pairs += gang
    fig = Figure(figsize=(12, 2.6 * max(len(pairs), 1)), layout="constrained")
    if not pairs:
        ax = fig.subplots()
        ax.text(0.5, 0.5, "no workload has reached a second stage yet", ha="center")
        ax.set_axis_off()
    else:
        axes = np.atleast_2d(fig.subplots(len(pairs), 2, width_ratios=(2.2, 1)))
        t0 = origin_ms(table)
        for (left, right), (start, end) in zip(axes, pairs, strict=True):
            _row(left, right, table, start, end, until_ms, t0)
        axes[-1][0].set_xlabel("submitted at (s since the first submission)")
        axes[-1][1].set_xlabel("delta (s)")
    fig.suptitle(f"Stage deltas — {len(table)} workload(s) ({kind})")
    FigureCanvasAgg(fig)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    return path


def _row(
    left: Axes,
    right: Axes,
    table: Sequence[Row],
    start: str,
    end: str,
    until_ms: float,
    t0: float,
) -> None:
    done_x: list[float] = []
    done_y: list[float] = []
    wait_x: list[float] = []
    wait_y: list[float] = []
    bad_x: list[float] = []
    bad_y: list[float] = []
    for row in table:
        interval = row.interval(start, end, until_ms)
        if interval is None:
            continue
        x, (delta, observed) = (row.submitted_ms - t0) / 1000, interval
        target = (bad_x, bad_y) if row.error else (done_x, done_y) if observed else (wait_x, wait_y)
        target[0].append(x)
        target[1].append(delta / 1000)
    ax = left
    ax.scatter(done_x, done_y, s=8, label="reached")
    hit = preempted_points(table, start, end, until_ms, t0)
    if hit:
        hit_x, hit_y = zip(*hit, strict=True)
        ax.scatter(
            hit_x,
            hit_y,
            s=40,
            marker="o",
            facecolors="none",
            edgecolors="tab:purple",
            label="preempted (a pod of it)",
        )
    if wait_x:
        ax.scatter(
            wait_x,
            wait_y,
            s=14,
            marker="^",
            facecolors="none",
            edgecolors="tab:orange",
            label="still waiting (≥)",
        )
    if bad_x:
        ax.scatter(bad_x, bad_y, s=18, marker="x", color="tab:red", label="error")
    ax.set_ylabel(f"{start} → {end} (s)", fontsize=8)
    ax.grid(alpha=0.3)
    if wait_x or bad_x or hit:
        ax.legend(fontsize=7, loc="upper left")
    curve = interval_survival(table, start, end, until_ms)
    p50, p99 = curve.quantile(0.5), curve.quantile(0.99)
    hist = right
    if done_y:
        hist.hist(done_y, bins=min(40, max(5, len(done_y) // 5)), color="tab:blue")
    for value, style in ((p50, "--"), (p99, ":")):
        if value is not None:
            hist.axvline(value / 1000, color="black", linestyle=style, linewidth=1)
    hist.set_title(
        f"p50 {_s(p50)}  p99 {_s(p99)}  reached {len(done_y)}  waiting {len(wait_y)}"
        + (f"  errors {len(bad_y)}" if bad_y else ""),
        fontsize=8,
    )
    hist.grid(alpha=0.3)


def preempted_points(
    table: Sequence[Row], start: str, end: str, until_ms: float, t0: float
) -> list[tuple[float, float]]:
    """(submitted at s, delta s) of the workloads a pod of which was preempted: ringed."""
    return [
        ((r.submitted_ms - t0) / 1000, i[0] / 1000)
        for r in table
        if PREEMPTED in r.extra and (i := r.interval(start, end, until_ms)) is not None
    ]


def _s(value: float | None) -> str:
    return "n/a" if value is None else f"{value / 1000:.3f} s"
