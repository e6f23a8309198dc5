"""One timer for all streams: deadlines in a heap, fired ``lead`` early, the lead self-tuned.

Streams started at a steady rate with the same inter-token latency tick in phase: dozens of
tokens fall due at the same instant. An asyncio timer per token would add a handle, two heap
operations and a trip through the loop for each; here one loop timer serves the earliest
deadline and every deadline then due is handled in the same pass, in deadline order.

The lead is a running median of lateness (sign-based tracking): a write that lands late moves
it up by ``STEP``, an early one moves it down, so it settles where half the writes are early
and half late. That cancels the machine's wake-up latency and centres bursts of simultaneous
deadlines on their instant, instead of writing the whole burst late.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import Callable
from heapq import heappop, heappush

#: A scheduled call: [deadline, tie-breaker, callback or None once cancelled].
Entry = list[object]


class Pacer:
    """Calls callbacks at absolute loop-time deadlines, precisely and cheaply."""

    STEP = 1e-6  # seconds the lead moves per observation
    MAX_LEAD = 1e-3  # never act more than a millisecond early

    def __init__(self, loop: asyncio.AbstractEventLoop, lead: float = 80e-6) -> None:
        self.lead = lead
        self._loop = loop
        self._heap: list[Entry] = []
        self._seq = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._armed_for = math.inf
        self._running = False

    def at(self, deadline: float, callback: Callable[[], None]) -> Entry:
        """Call ``callback()`` at ``deadline`` (loop time, seconds); returns a cancel token."""
        entry: Entry = [deadline, next(self._seq), callback]
        heappush(self._heap, entry)
        if deadline < self._armed_for and not self._running:
            self._arm(deadline)
        return entry

    def next_due(self) -> float | None:
        """The earliest pending deadline, if any."""
        heap = self._heap
        while heap and heap[0][2] is None:
            heappop(heap)
        return heap[0][0] if heap else None  # type: ignore[return-value]

    @staticmethod
    def cancel(entry: Entry) -> None:
        entry[2] = None

    def observe(self, error: float) -> None:
        """Feed one lateness sample: ``error`` = action time − deadline (seconds)."""
        if error > 0:
            if self.lead < self.MAX_LEAD:
                self.lead += self.STEP
        elif self.lead > 0:
            self.lead -= self.STEP

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._heap.clear()

    def _arm(self, deadline: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._armed_for = deadline
        self._timer = self._loop.call_at(deadline - self.lead, self._fire)

    def _fire(self) -> None:
        self._timer = None
        self._armed_for = math.inf
        heap, time = self._heap, self._loop.time
        self._running = True
        try:
            while heap and heap[0][0] <= time() + self.lead:  # type: ignore[operator]
                callback = heappop(heap)[2]
                if callback is not None:
                    callback()  # type: ignore[operator]
        finally:
            self._running = False
            while heap and heap[0][2] is None:
                heappop(heap)
            if heap:
                self._arm(heap[0][0])  # type: ignore[arg-type]
