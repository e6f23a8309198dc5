"""How far along a load test is: stage k of n, requests done of requested, time left.

The probe says it through ``ctx.progress`` (``testbed run``'s live display, ``testbed load``'s
standard error) when a stage starts, every ``interval_s`` while it runs, and when it ends.
Requests done are the records written (:attr:`RecordWriter.count`, read from the loop: an
int another thread increments), so nothing is added to the request's own path; the ticker
wakes the loop once per interval.

Time left is the stage's own (``duration_s`` less the time spent; for a stage bounded by a
request count, the requests left at the rate so far, whichever ends it first) plus, for a
sweep, nothing of the stages still to come: their count is shown instead ("stage 2 of 7").
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from testbed.config.load import LoadProbe
from testbed.core.clock import duration_text, monotonic_ns
from testbed.probes.load.runner import Stage


def stage_count(config: LoadProbe) -> int:
    """How many stages the profile runs (a sweep: synchronous, saturation, its rates; a
    stage list: its length)."""
    if config.profile == "sweep":
        return 2 + config.sweep.rates
    return len(config.stages) if config.stages is not None else 1


@dataclass
class StageProgress:
    """One stage's progress line, from the records counted since it began."""

    stage: Stage
    number: int  # 1-based
    of: int
    started_ns: int

    def left_s(self, done: int, now_ns: int) -> float | None:
        """Seconds left in the stage, or None when nothing tells yet."""
        elapsed = (now_ns - self.started_ns) / 1e9
        bounds = []
        if self.stage.duration_s is not None:
            bounds.append(max(0.0, self.stage.duration_s - elapsed))
        if self.stage.max_requests is not None and done > 0 and elapsed > 0:
            bounds.append(max(0, self.stage.max_requests - done) / (done / elapsed))
        return min(bounds) if bounds else None

    def line(self, done: int, now_ns: int, *, ended: bool = False) -> str:
        asked = self.stage.max_requests
        count = f"{done} of {asked} requests" if asked is not None else f"{done} requests"
        head = f"load: stage {self.number} of {self.of} ({self.stage.name}): {count}"
        elapsed = duration_text((now_ns - self.started_ns) / 1e9)
        if ended:
            return f"{head}, done in {elapsed}"
        left = self.left_s(done, now_ns)
        return f"{head}, {elapsed} in" + (
            f", ~{duration_text(left)} left" if left is not None else ""
        )


@contextlib.asynccontextmanager
async def reporting(
    say: Callable[[str], None],
    progress: StageProgress,
    written: Callable[[], int],
    interval_s: float = 2.0,
    clock: Callable[[], int] = monotonic_ns,
) -> AsyncIterator[None]:
    """Say the stage's progress at its start, every ``interval_s`` and at its end;
    ``written()`` counts the records written so far (the stage's are those since its start)."""
    base = written()
    say(progress.line(0, clock()))

    async def tick() -> None:
        while True:
            await asyncio.sleep(interval_s)
            say(progress.line(written() - base, clock()))

    ticker = asyncio.create_task(tick())
    try:
        yield
    finally:
        ticker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ticker
    say(progress.line(written() - base, clock(), ended=True))
