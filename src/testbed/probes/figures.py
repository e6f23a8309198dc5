"""The probes' figures on fixed margins: panels in a grid, no layout engine.

Constrained layout measured every tick label twice before each draw — about 40 % of a
figure's CPU, paid for every treatment's pictures and again by the report. The probes'
panels have short, known labels (fractions, ms, s, rates, %), so margins fixed in inches
hold them: checked with six-digit tick labels and long legend labels.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from matplotlib.figure import Figure

#: Around the grid of panels (inches): tick labels and an axis label on the left and at the
#: bottom, the figure's title at the top.
MARGINS_IN = {"left": 0.9, "right": 0.2, "bottom": 0.6, "top": 0.55}
SHARED_GAP_IN = 0.3  # between panels of one column, which share their x axis


def panels(width: float, height: float, rows: int, cols: int) -> tuple[Figure, npt.NDArray[Any]]:
    """A ``width`` × ``height`` inch figure of ``rows`` × ``cols`` panels (flat, row by row);
    a single column shares its x axis (tick labels on the bottom panel only)."""
    fig = Figure(figsize=(width, height))
    shared = cols == 1
    gap_x = MARGINS_IN["left"]
    gap_y = SHARED_GAP_IN if shared else MARGINS_IN["bottom"] + 0.1
    across = width - MARGINS_IN["left"] - MARGINS_IN["right"]
    down = height - MARGINS_IN["bottom"] - MARGINS_IN["top"]
    fig.subplots_adjust(
        left=MARGINS_IN["left"] / width,
        right=1 - MARGINS_IN["right"] / width,
        bottom=MARGINS_IN["bottom"] / height,
        top=1 - MARGINS_IN["top"] / height,
        wspace=gap_x / ((across - (cols - 1) * gap_x) / cols),
        hspace=gap_y / ((down - (rows - 1) * gap_y) / rows),
    )
    return fig, np.asarray(fig.subplots(rows, cols, sharex=shared)).ravel()
