"""Writing records without ever stalling the event loop.

A write to a file can block for tens of milliseconds when the disk is busy (the kernel
throttles processes with many dirty pages); on the load generator's event loop that would
delay sends and chunk timestamps. :class:`BackgroundWriter` takes records from the loop with
one deque append and writes them from a thread every ``interval_s`` (20 ms): records still
reach the disk as they complete, a few milliseconds later.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self


class BackgroundWriter:
    """``writer(item)`` queues; a thread calls ``write(item)`` for each, in order."""

    def __init__(self, write: Callable[[Any], None], interval_s: float = 0.02) -> None:
        self._write = write
        self._interval = interval_s
        self._queue: collections.deque[Any] = collections.deque()
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="testbed-records", daemon=True)
        self._thread.start()

    def __call__(self, item: Any) -> None:
        self._queue.append(item)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._drain()
        self._drain()

    def _drain(self) -> None:
        queue = self._queue
        try:
            while queue:
                self._write(queue.popleft())
        except BaseException as exc:  # a full disk: reported by close(), in the loop's thread
            self._error = exc
            queue.clear()

    def close(self) -> None:
        """Write what is queued, stop the thread, and raise what writing raised."""
        self._stop.set()
        self._thread.join()
        if self._error is not None:
            raise self._error

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
