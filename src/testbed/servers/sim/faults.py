"""Fault injection: which faults one request suffers, drawn from the simulator's seed.

Each fault is drawn independently with its configured rate, in a fixed order, from a
generator seeded once per simulator, so a sequential run is reproducible. Where they act:
``error`` answers ``error_status`` at once; ``disconnect`` closes the connection half-way
through a stream (a non-streamed request gets no answer at all); ``malformed`` breaks one
event of a stream (or the JSON body of a non-streamed answer); ``corrupt`` changes the text.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from testbed.config.sim import Faults


@dataclass(frozen=True, slots=True)
class FaultPlan:
    """The faults one request gets."""

    error: bool = False
    disconnect: bool = False
    malformed: bool = False
    corrupt: bool = False

    @property
    def any_stream_fault(self) -> bool:
        return self.disconnect or self.malformed

    def kinds(self) -> list[str]:
        return [k for k in ("error", "disconnect", "malformed", "corrupt") if getattr(self, k)]


NO_FAULTS = FaultPlan()


class FaultInjector:
    """Draws a :class:`FaultPlan` per request; free when every rate is zero."""

    def __init__(self, faults: Faults, seed: int) -> None:
        self._faults = faults
        self._rng = random.Random(seed ^ 0x5EED_FA17)
        self.active = any(
            rate > 0
            for rate in (
                faults.error_rate,
                faults.disconnect_rate,
                faults.malformed_rate,
                faults.corrupt_rate,
            )
        )

    def draw(self) -> FaultPlan:
        if not self.active:
            return NO_FAULTS
        f, rand = self._faults, self._rng.random
        return FaultPlan(
            error=rand() < f.error_rate,
            disconnect=rand() < f.disconnect_rate,
            malformed=rand() < f.malformed_rate,
            corrupt=rand() < f.corrupt_rate,
        )
