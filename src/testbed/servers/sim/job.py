"""One admitted generation: when each token is due, what is written, and its accounting.

Tokens are paced against absolute deadlines on the loop's monotonic clock — first token at
``start + ttft``, token *i* at the previous deadline plus one drawn gap — never by sleeping a
gap after each write, so lateness does not accumulate. A timer fires ``TIMER_LEAD`` before the
deadline (the measured wake-up latency of the precise loop, see :mod:`.loop`) and writes every
event then due: events are coalesced into one write only when the server is late.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from testbed.servers.sim.dialect import GenerationRequest
from testbed.servers.sim.faults import FaultPlan
from testbed.servers.sim.http import Connection
from testbed.servers.sim.text import Generation

if TYPE_CHECKING:
    from testbed.servers.sim.app import SimApp

#: Seconds a timer is set ahead of its deadline, to absorb the loop's wake-up latency.
TIMER_LEAD = 0.00008


class Job:
    """A request between admission and its last byte (or its client's departure)."""

    __slots__ = (
        "_app",
        "_base",
        "_conn",
        "_deadline",
        "_disconnect_at",
        "_events",
        "_faults",
        "_first_at",
        "_gap",
        "_gen",
        "_handle",
        "_i",
        "_others",
        "_req",
        "_tail",
        "waiting",
    )

    def __init__(
        self,
        app: SimApp,
        conn: Connection,
        req: GenerationRequest,
        gen: Generation,
        faults: FaultPlan,
        arrival: float,
    ) -> None:
        self._app = app
        self._conn = conn
        self._req = req
        self._gen = gen
        self._base = arrival
        self._faults = faults
        self._handle: asyncio.TimerHandle | None = None
        self._events: list[str] = []
        self._tail = ""
        self._disconnect_at = -1
        self._i = 0
        self._deadline = 0.0
        self._gap = 0.0
        self._first_at = 0.0
        self._others = 0
        self.waiting = False
        if req.stream:
            self._events = req.events(gen)
            self._tail = req.tail(gen)
            if faults.malformed:
                mid = len(self._events) // 2
                self._events[mid] = req.malformed(self._events[mid])
            if faults.disconnect:
                self._disconnect_at = len(self._events) // 2
        elif faults.disconnect:
            self._disconnect_at = 0
        conn.on_lost = self.lost

    # -- lifecycle, driven by the app
    def start(self, now: float, queued: bool) -> None:
        """Admitted: draw the schedule and write whatever is already due."""
        app = self._app
        if queued:
            self._base = now  # TTFT counts from admission (the queue time is on top)
        app.metrics.queue_time.observe(now - self._base if queued else 0.0)
        self._others = app.metrics.running - 1
        model = app.latency
        self._deadline = self._base + model.ttft(self._req.prompt_tokens, self._others)
        if model.constant_itl:
            self._gap = model.itl(0)
        if self._req.stream:
            if self._deadline > now + TIMER_LEAD:
                self._conn.start_stream(self._req.content_type)  # headers go out at once
                self._schedule()
            else:
                self._tick(head=True)
        else:
            n = len(self._gen.ids)
            self._first_at = self._deadline
            if model.constant_itl:
                self._deadline += self._gap * (n - 1)
            else:
                self._deadline += sum(model.itl(self._others) for _ in range(n - 1))
            self._schedule()

    def reject(self) -> None:
        """The waiting queue is full: 503 at once, as an overloaded server answers."""
        self._conn.on_lost = None
        message = "the waiting queue is full (max_waiting)"
        self._conn.respond(503, self._req.error_body(503, message))

    def lost(self) -> None:
        """The client went away: stop, free the slot."""
        if self._handle is not None:
            self._handle.cancel()
        self._app.finished(self, aborted=True)

    # -- internals
    def _schedule(self) -> None:
        loop = self._app.loop
        callback = self._tick if self._req.stream else self._answer
        self._handle = loop.call_at(self._deadline - TIMER_LEAD, callback)

    def _answer(self) -> None:
        """The non-streamed answer, at the time its last token would have been written."""
        self._handle = None
        if self._disconnect_at == 0:
            self._conn.drop()
            self._app.finished(self, aborted=True)
            return
        body = self._req.whole(self._gen)
        if self._faults.malformed:
            body = body[: len(body) // 2]
        self._conn.respond(200, body)
        self._app.finished(self)

    def _tick(self, head: bool = False) -> None:
        """Write every event whose deadline has come (coalesced only when late)."""
        self._handle = None
        app = self._app
        now = app.loop.time() + TIMER_LEAD
        events, n, i = self._events, len(self._events), self._i
        if i == 0:
            self._first_at = now - TIMER_LEAD
        start = i
        itl_hist = app.metrics.itl
        while i < n and self._deadline <= now:
            i += 1
            if i < n:
                gap = self._gap if app.latency.constant_itl else self._next_gap()
                self._deadline += gap
                itl_hist.observe(gap)
        self._i = i
        if 0 <= self._disconnect_at <= i:
            self._write(events[start : self._disconnect_at], head, last=False)
            self._conn.drop()
            app.finished(self, aborted=True)
            return
        last = i == n
        self._write(events[start:i], head, last)
        if last:
            app.finished(self)
        else:
            self._schedule()

    def _next_gap(self) -> float:
        return self._app.latency.itl(max(0, self._app.metrics.running - 1))

    def _write(self, events: list[str], head: bool, last: bool) -> None:
        text = "".join(events) + self._tail if last else "".join(events)
        data = text.encode()
        if head:
            self._conn.start_stream(self._req.content_type, data, last)
        else:
            self._conn.send(data, last)

    # -- read by the app for accounting
    @property
    def request(self) -> GenerationRequest:
        return self._req

    @property
    def generation(self) -> Generation:
        return self._gen

    @property
    def first_token_at(self) -> float:
        return self._first_at

    @property
    def base(self) -> float:
        return self._base
