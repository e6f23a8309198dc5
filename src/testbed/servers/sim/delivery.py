"""The delivery of one admitted generation: when each token is due, what is written, and
its accounting.

Tokens are paced against absolute deadlines on the loop's monotonic clock — first token at
``start + ttft``, token *i* at the previous deadline plus one drawn gap — never by sleeping a
gap after each write, so lateness does not accumulate. A timer fires ``pacer.lead`` before its
deadline and writes every event then due; events are coalesced into one write only when the
server is late. The :class:`~testbed.servers.sim.pacing.Pacer` learns the lead from the
errors it observes so that the median write lands on its deadline.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from testbed.servers.http1 import Connection
from testbed.servers.sim.dialect import GenerationRequest
from testbed.servers.sim.faults import FaultPlan
from testbed.servers.sim.kvcache import Allocation
from testbed.servers.sim.latency import LatencyModel
from testbed.servers.sim.metrics import SimMetrics
from testbed.servers.sim.pacing import Entry, Pacer
from testbed.servers.sim.text import Generation


class Host(Protocol):
    """What a delivery needs of the server that admitted it (``app.SimApp`` is one): stated
    here, so that this module does not import the app that imports it."""

    loop: asyncio.AbstractEventLoop
    metrics: SimMetrics
    pacer: Pacer

    def latency_for(self, model: str | None) -> LatencyModel: ...
    def finished(self, delivery: Delivery, aborted: bool = False) -> None: ...


class Delivery:
    """One admitted request being answered: from admission to its last byte (or its
    client's departure), waiting in the queue first when the server is full."""

    __slots__ = (
        "_app",
        "_base",
        "_conn",
        "_constant",
        "_deadline",
        "_disconnect_at",
        "_events",
        "_faults",
        "_first_at",
        "_gap",
        "_gen",
        "_handle",
        "_i",
        "_latency",
        "_req",
        "_tail",
        "cached_tokens",
        "kv",
        "kv_hashes",
        "kv_tail",
        "kv_tokens",
        "waiting",
    )

    def __init__(
        self,
        app: Host,
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
        self._handle: Entry | None = None
        self._events: list[bytes] = []
        self._tail = b""
        self._disconnect_at = -1
        self._i = 0
        self._deadline = 0.0
        self._gap = 0.0
        self._latency = app.latency_for(req.model)
        self._constant = self._latency.constant_itl
        self._first_at = 0.0
        self.waiting = False
        # KV cache (set by the app when it has one): what the request holds and asks for.
        self.kv: Allocation | None = None
        self.kv_hashes: list[int] = []
        self.kv_tail: list[int] = []  # the answer's full blocks, cached when it ends
        self.kv_tokens = 0
        self.cached_tokens = 0
        if req.stream:
            events = req.events(gen)
            if faults.malformed:
                mid = len(events) // 2
                events[mid] = req.malformed(events[mid])
            if faults.disconnect:
                self._disconnect_at = len(events) // 2
            self._events = events
            self._tail = req.tail(gen)
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
        model = self._latency
        others = app.metrics.running - 1
        prefill = self._req.prompt_tokens - self.cached_tokens  # cached tokens skip prefill
        self._deadline = self._base + model.ttft(prefill, others)
        if self._constant:
            self._gap = model.itl(0)
        if self._req.stream:
            if self._deadline > now + app.pacer.lead:
                self._conn.start_stream(self._req.content_type)  # headers go out at once
                self._schedule()
            else:
                self._tick(head=True)
        else:
            n = len(self._gen.ids)
            self._first_at = self._deadline
            if self._constant:
                self._deadline += self._gap * (n - 1)
            else:
                self._deadline += sum(model.itl(others) for _ in range(n - 1))
            self._schedule()

    def reject(self) -> None:
        """The waiting queue is full: 503 at once, as an overloaded server answers."""
        self._conn.on_lost = None
        self._conn.respond(503, self._req.overloaded("the waiting queue is full (max_waiting)"))

    def lost(self) -> None:
        """The client went away: stop, free the slot."""
        if self._handle is not None:
            self._app.pacer.cancel(self._handle)
        self._app.finished(self, aborted=True)

    # -- internals
    def _schedule(self) -> None:
        app = self._app
        callback = self._tick if self._req.stream else self._answer
        self._handle = app.pacer.at(self._deadline, callback)

    def _answer(self) -> None:
        """The non-streamed answer, at the time its last token would have been written."""
        self._handle = None
        app = self._app
        app.pacer.observe(app.loop.time() - self._deadline)
        if self._disconnect_at == 0:
            self._conn.drop()
            app.finished(self, aborted=True)
            return
        body = self._req.whole(self._gen)
        if self._faults.malformed:
            body = body[: len(body) // 2]
        self._conn.respond(200, body)
        app.finished(self)

    def _tick(self, head: bool = False) -> None:
        """Write every event whose deadline has come (coalesced only when late)."""
        self._handle = None
        app = self._app
        now = app.loop.time()
        if not head:  # only timer-driven writes teach the pacer its lead
            app.pacer.observe(now - self._deadline)
        horizon = now + app.pacer.lead
        n, i = len(self._events), self._i
        if i == 0:
            self._first_at = now
        start = i
        if self._constant:
            while i < n and self._deadline <= horizon:
                i += 1
                if i < n:
                    self._deadline += self._gap
            gaps = i - max(start, 1)  # every token but the stream's first follows a gap
            if gaps > 0:
                app.metrics.itl.observe(self._gap, gaps)
        else:
            while i < n and self._deadline <= horizon:
                i += 1
                if i < n:
                    gap = self._latency.itl(max(0, app.metrics.running - 1))
                    self._deadline += gap
                    app.metrics.itl.observe(gap)
        self._i = i
        if 0 <= self._disconnect_at <= i:
            self._write(self._events[start : self._disconnect_at], head, last=False)
            self._conn.drop()
            app.finished(self, aborted=True)
            return
        last = i == n
        self._write(self._events[start:i], head, last)
        if last:
            app.finished(self)
        else:
            self._schedule()

    def _write(self, events: list[bytes], head: bool, last: bool) -> None:
        data = events[0] if len(events) == 1 else b"".join(events)
        if last:
            data += self._tail
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
