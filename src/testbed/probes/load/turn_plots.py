"""The picture of a multi-turn load: TTFT by turn index (p50 with the p90 above it), one
line per load — the prefix cache's effect made visible: each turn carries a longer history,
which a server without a cache prefills again."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.figure import Figure

from testbed.probes.figures import panels


def ttft_by_turn(lines: Mapping[str, Sequence[Mapping[str, Any]]], title: str) -> Figure:
    """``lines``: a label and the summary's ``by_turn`` rows of each load."""
    fig, (ax,) = panels(6.4, 3.6, 1, 1)
    for label, rows in lines.items():
        turns = [r["turn"] + 1 for r in rows if r["ttft_ms"]["p50"] is not None]
        p50 = [r["ttft_ms"]["p50"] for r in rows if r["ttft_ms"]["p50"] is not None]
        p90 = [r["ttft_ms"]["p90"] for r in rows if r["ttft_ms"]["p50"] is not None]
        (line,) = ax.plot(turns, p50, marker="o", label=f"{label} p50")
        ax.plot(turns, p90, linestyle="--", color=line.get_color(), label=f"{label} p90")
    ax.set_xlabel("turn of the session")
    ax.set_ylabel("TTFT (ms)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    fig.suptitle(title)
    return fig
