"""The harness checks itself on every run: schedule lag, achieved vs requested rate, its CPU.

A load generator that cannot keep up reports the server slower than it is (its own queue
adds to every latency) and a rate it never sent. These checks turn such a run into
INCONCLUSIVE with the reason, instead of a number nobody should trust:

- **schedule lag** (sent − scheduled − time queued for a ``max_in_flight`` slot), p99 above
  ``max_lag_p99_ms``; the reason says whose limit it was: the generator's (its process busy)
  or the machine's (late while mostly off the CPU: other programs held the cores);
- **rate shortfall** in open loop: achieved send rate below ``min_rate_ratio`` × requested
  while no request waited for a slot (waiting for a slot is the server's doing);
- **CPU saturation**: a load process busy more than ``max_cpu_fraction`` of the wall time
  (the event loop was the bottleneck; use more ``processes``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from testbed.clients.readpath import compiled
from testbed.config.load import SelfCheck
from testbed.probes.load.runner import StageRun
from testbed.results.metrics import Record, Window, distribution

#: A late load process on a CPU less than this share of the stage was starved, not busy.
STARVED_FRACTION = 0.5


@dataclass
class Check:
    """The harness block of a stage summary and the reasons it is untrustworthy."""

    harness: dict[str, Any]
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def check(run: StageRun, records: Sequence[Record], win: Window, limits: SelfCheck) -> Check:
    """The self-check of one stage."""
    lags = distribution(lag / 1e6 for lag in run.lags_ns)
    lag_p50, lag_p99 = lags["p50"] or 0.0, lags["p99"] or 0.0
    seconds = win.seconds
    sent_in = sum(1 for r in records if r.get("sent_ns") in win)
    achieved = sent_in / seconds if seconds > 0 else 0.0
    completed = sum(1 for r in records if r.get("done_ns") is not None)
    harness: dict[str, Any] = {
        "schedule_lag_ms": {"p50": lag_p50, "p99": lag_p99},
        "requested_rate": run.requested_rate,
        "achieved_rate": achieved,
        "cpu_ms_per_request": run.cpu_s * 1e3 / completed if completed else None,
        "cpu_fraction": run.cpu_fraction_max,
        "processes": run.processes,
        "capped_requests": run.capped,
        "precise_timer": run.precise_timer,
    }
    result = Check(harness)
    if lag_p99 > limits.max_lag_p99_ms:
        result.problems.append(
            f"schedule lag p99 {lag_p99:.2f} ms > {limits.max_lag_p99_ms:g} ms: the generator"
            f" could not send on time{_whose_limit(run)}"
        )
    if run.requested_rate and run.capped == 0:
        ratio = achieved / run.requested_rate
        if ratio < limits.min_rate_ratio:
            result.problems.append(
                f"achieved rate {achieved:.2f}/s is {ratio:.1%} of the requested"
                f" {run.requested_rate:.2f}/s (below {limits.min_rate_ratio:.0%})"
            )
    if run.capped:
        result.notes.append(
            f"{run.capped} requests waited for one of max_in_flight slots: the server did not"
            " keep up with the requested rate"
        )
    if run.cpu_fraction_max > limits.max_cpu_fraction:
        result.problems.append(
            f"a load process used {run.cpu_fraction_max:.0%} of a core (limit"
            f" {limits.max_cpu_fraction:.0%}): its own queueing inflates latencies;"
            f" raise `processes`{_without_compiled_reads()}"
        )
    if not run.precise_timer:
        result.notes.append("no precise timer on this platform: sends may lag up to ~1 ms")
    return result


def _without_compiled_reads() -> str:
    """When the generator was the limit: that it ran without its compiled read path."""
    if compiled is not None:
        return ""
    return (
        "; testbed was installed without its compiled read path (no C compiler then):"
        " reinstalled with one, each streamed request costs about a quarter less CPU"
        " (~0.15–0.4 ms)"
    )


def _whose_limit(run: StageRun) -> str:
    """Why sends were late: the generator's own work (its process busy most of the time),
    or other programs holding the cores (late although it was mostly off the CPU)."""
    if run.cpu_fraction_max >= STARVED_FRACTION:
        return f" (lower the rate or raise `processes`){_without_compiled_reads()}"
    load = (
        f" (load average {run.load_average:.1f} on {os.cpu_count()} cores)"
        if run.load_average is not None
        else ""
    )
    return (
        f", yet its busiest process was on a CPU only {run.cpu_fraction_max:.0%} of the time:"
        f" other programs held the cores{load} — the machine, not the generator's code, was"
        " the limit; measure on a quieter machine"
    )
