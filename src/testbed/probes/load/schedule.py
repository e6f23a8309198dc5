"""Open-loop arrival schedules and a precise way to wait for them.

Schedules are absolute: arrival *k* is due at ``t0 + offsets[k]``, never "sleep one
interval after the last send", so a late wake-up delays one request instead of every
request after it (an event loop that sleeps a little too long per interval silently
under-delivers the rate). A request that is already due is sent at once and its lag
(sent − scheduled) is recorded.

Waiting precisely: event-loop timers (asyncio's epoll selector, libuv) wake up to a
millisecond late. On Linux :class:`PreciseTimer` arms a ``timerfd`` at the absolute
``CLOCK_MONOTONIC`` deadline (the clock of ``time.perf_counter_ns``) and lets the loop
watch the descriptor, so the wake-up is within the kernel's timer slack (~50 µs) with no
spinning and no thread. Elsewhere it falls back to the loop's own timer.

Offsets come from a unit-rate renewal process (constant, Poisson or gamma gaps, seeded),
mapped through the inverse of the cumulative rate: ``t = s / rate`` for a constant rate,
and the root of ``r0·t + (r1 − r0)·t² / (2·D) = s`` for a linear ramp from r0 to r1 over D.
"""

from __future__ import annotations

import asyncio
import ctypes
import math
import os
import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass

from testbed.core.clock import monotonic_ns


@dataclass(frozen=True)
class Arrivals:
    """How an open-loop stage spaces its requests."""

    rate: float  # requests/s (the start rate of a ramp; a trace's mean rate)
    arrival: str = "poisson"  # constant | poisson | gamma | trace
    gamma_shape: float = 1.0
    end_rate: float | None = None  # a linear ramp to this rate over the duration
    #: a trace's own send offsets (ns from the stage start), used as they are
    offsets: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.offsets is not None and not isinstance(self.offsets, tuple):  # read from JSON
            object.__setattr__(self, "offsets", tuple(self.offsets))


def unit_epochs(arrival: str, rng: random.Random, shape: float = 1.0) -> Iterator[float]:
    """Arrival epochs of a renewal process with mean gap 1, forever (``constant`` starts at
    0; the random processes start after one gap)."""
    t = 0.0
    if arrival == "constant":
        while True:
            yield t
            t += 1.0
    while True:
        t += rng.expovariate(1.0) if arrival == "poisson" else rng.gammavariate(shape, 1 / shape)
        yield t


def offsets_ns(
    spec: Arrivals, duration_s: float | None, max_requests: int | None, seed: int
) -> list[int]:
    """Send offsets (ns from the stage start) of every request of an open-loop stage."""
    if spec.offsets is not None:
        return list(spec.offsets)
    if duration_s is None and max_requests is None:
        raise ValueError("an open-loop stage needs a duration or a request count")
    horizon = duration_s if duration_s is not None else math.inf
    limit = max_requests if max_requests is not None else sys.maxsize
    out: list[int] = []
    for s in unit_epochs(spec.arrival, random.Random(seed), spec.gamma_shape):
        t = _time_of(s, spec, duration_s)
        if t >= horizon or len(out) >= limit:
            return out
        out.append(round(t * 1e9))
    return out


def _time_of(s: float, spec: Arrivals, duration_s: float | None) -> float:
    """The time at which the cumulative rate reaches ``s``."""
    if spec.end_rate is None or duration_s is None or spec.end_rate == spec.rate:
        return s / spec.rate
    r0, slope = spec.rate, (spec.end_rate - spec.rate) / duration_s
    # r0·t + slope·t²/2 = s  →  t = (−r0 + sqrt(r0² + 2·slope·s)) / slope
    disc = r0 * r0 + 2 * slope * s
    if disc < 0:  # a falling ramp that never accumulates s
        return math.inf
    return (-r0 + math.sqrt(disc)) / slope


# -- waiting -------------------------------------------------------------------------------


class _Timespec(ctypes.Structure):
    _fields_ = (("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long))


class _Itimerspec(ctypes.Structure):
    _fields_ = (("it_interval", _Timespec), ("it_value", _Timespec))


_CLOCK_MONOTONIC, _TFD_NONBLOCK, _TFD_CLOEXEC, _TFD_TIMER_ABSTIME = 1, 0o4000, 0o2000000, 1


class PreciseTimer:
    """Waits until an absolute ``monotonic_ns`` deadline with sub-millisecond precision.

    One per event loop; close it when done. ``precise`` is False where timerfd is not
    available (the loop's timer is used, up to ~1 ms late: lags are recorded either way).
    """

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._fd = -1
        self._waiter: asyncio.Future[None] | None = None
        if sys.platform.startswith("linux"):
            try:
                self._libc = ctypes.CDLL(None, use_errno=True)
                self._fd = int(
                    self._libc.timerfd_create(_CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC)
                )
            except (OSError, AttributeError):
                self._fd = -1
        if self._fd >= 0:
            self._loop.add_reader(self._fd, self._fired)

    @property
    def precise(self) -> bool:
        return self._fd >= 0

    async def sleep_until(self, deadline_ns: int) -> None:
        """Return at (or just after) ``deadline_ns``; at once if it has passed."""
        delay = deadline_ns - monotonic_ns()
        if delay <= 0:
            return
        if self._fd < 0:
            await asyncio.sleep(delay / 1e9)
            return
        spec = _Itimerspec(
            _Timespec(0, 0), _Timespec(deadline_ns // 1_000_000_000, deadline_ns % 1_000_000_000)
        )
        self._waiter = self._loop.create_future()
        if self._libc.timerfd_settime(self._fd, _TFD_TIMER_ABSTIME, ctypes.byref(spec), None):
            self._waiter = None
            await asyncio.sleep(delay / 1e9)
            return
        try:
            await self._waiter
        finally:
            self._waiter = None

    def _fired(self) -> None:
        try:
            os.read(self._fd, 8)
        except BlockingIOError:
            return
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def close(self) -> None:
        if self._fd >= 0:
            self._loop.remove_reader(self._fd)
            os.close(self._fd)
            self._fd = -1
