"""Quantiles of stage durations when some workloads have not got there yet (Kaplan–Meier).

A workload still pending when the sample was taken is *censored*: all we know is that its
duration exceeds the time it has waited so far. Dropping it would bias every quantile
down (the slow ones are exactly those not finished); counting its wait as its duration
would too. The Kaplan–Meier estimator uses it for what it is. A quantile the data cannot
reach (too many censored beyond it) is ``None``, never a guess.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True)
class Survival:
    """The Kaplan–Meier curve: at each distinct event time, the fraction still waiting."""

    times: npt.NDArray[np.float64]  # distinct event times, ascending
    survival: npt.NDArray[np.float64]  # S(t) just after each of those times
    events: int  # durations observed in full
    censored: int  # durations known only to exceed a value
    longest_wait: float  # the largest duration or censoring time seen

    def quantile(self, q: float) -> float | None:
        """The smallest t with F(t) = 1 − S(t) ≥ q; None when the curve never gets there."""
        if self.times.size == 0:
            return None
        reached = np.nonzero(1.0 - self.survival >= q - 1e-12)[0]
        return float(self.times[reached[0]]) if reached.size else None

    def fraction_done_by(self, t: float) -> float:
        """F(t): the estimated fraction with a duration ≤ t (0 before the first event)."""
        index = int(np.searchsorted(self.times, t, side="right"))
        return 0.0 if index == 0 else float(1.0 - self.survival[index - 1])


def kaplan_meier(durations: Sequence[float], observed: Sequence[bool]) -> Survival:
    """The curve of ``durations``; ``observed[i]`` is False for a censored one.

    Ties: events at a time are counted before censorings at that same time (the usual
    convention: a workload censored at t was still waiting at t).
    """
    values = np.asarray(durations, dtype=np.float64)
    done = np.asarray(observed, dtype=bool)
    if values.shape != done.shape:
        raise ValueError("durations and observed differ in length")
    if values.size == 0:
        empty = np.empty(0)
        return Survival(empty, empty, 0, 0, 0.0)
    event_times, deaths = np.unique(values[done], return_counts=True)
    at_risk = values.size - np.searchsorted(np.sort(values), event_times, side="left")
    survival = np.cumprod(1.0 - deaths / at_risk) if event_times.size else np.empty(0)
    return Survival(
        event_times,
        survival,
        events=int(done.sum()),
        censored=int((~done).sum()),
        longest_wait=float(values.max()),
    )
