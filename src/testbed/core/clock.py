"""Clocks: monotonic nanoseconds for intervals, wall time only as a label."""

from __future__ import annotations

import datetime as _dt
import time

from kubefacts import times

#: Monotonic nanoseconds; the only clock used to measure intervals.
monotonic_ns = time.perf_counter_ns


def anchor() -> dict[str, int]:
    """A wall-clock time and the monotonic time of the same instant, taken once per run:
    with it a record's monotonic stamps become wall time
    (``wall_ns + (t - monotonic_ns)``), to join a server's log. The monotonic side is the
    midpoint of two reads around the wall read (a microsecond apart)."""
    before = monotonic_ns()
    wall = time.time_ns()
    after = monotonic_ns()
    return {"wall_ns": wall, "monotonic_ns": (before + after) // 2}


def wall_label() -> str:
    """The current wall time as an ISO-8601 UTC label (never used for arithmetic)."""
    return times.now()


def wall_seconds() -> int:
    """Seconds since the epoch, as a label (OpenAI's ``created`` field), never an interval."""
    return int(_dt.datetime.now(_dt.UTC).timestamp())


def run_stamp() -> str:
    """A sortable wall-time stamp for run directory names, e.g. ``20261121-101500``."""
    return _dt.datetime.now(_dt.UTC).strftime("%Y%m%d-%H%M%S")


def duration_text(seconds: float) -> str:
    """``42s``, ``3m05s``, ``1h02m``."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
