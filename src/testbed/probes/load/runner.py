"""The load generator: runs one stage (closed or open loop) and writes one record per request.

Hot-path rules, because the harness must cost about a millisecond of CPU per streamed
request or less: request bytes are encoded before the stage starts; a response is parsed
as it arrives by the protocol sink (one JSON decode per event, one clock read per network
read); the record is a flat dict written the moment the request ends; nothing is computed
from records until the stage is over.

Lag is measured for every request: in open loop ``sent − scheduled − queued`` (queued =
time spent waiting for a ``max_in_flight`` slot, which is the server's doing, not the
harness's); in closed loop ``sent − the moment the worker became free``. Time spent
opening a new connection is recorded apart (``connect_ns``) and left out of the lag;
connections are opened before a stage starts to keep it rare.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from testbed.clients.apis import APIS, AnySink, Api
from testbed.clients.counts import Limits
from testbed.clients.embeddings import Expect
from testbed.clients.http import HttpClientError, ReadTimeout
from testbed.clients.http_errors import ErrorKind
from testbed.clients.response import Response
from testbed.core.clock import monotonic_ns
from testbed.core.secrets import mask
from testbed.probes.load import embeddings
from testbed.probes.load.dataset import Item
from testbed.probes.load.record import request_record
from testbed.probes.load.schedule import Arrivals, PreciseTimer, offsets_ns
from testbed.probes.load.tokens import TokenCounter
from testbed.results.records import LoadRecord, RequestPlace

RecordSink = Callable[[LoadRecord], None]


class Sender(Protocol):
    """Where encoded requests go: the HTTP pool, or the gRPC channel of the tgis api (each
    with the sinks of its protocol)."""

    async def send(
        self,
        payload: bytes,
        sink: Any,
        timeout_s: float | None = None,
        request_id: str | None = None,
    ) -> int: ...

    async def warm(self, connections: int) -> None: ...


@dataclass(frozen=True)
class Stage:
    """One load level. ``concurrency`` is used in closed loop; ``arrivals`` in open loop."""

    name: str
    concurrency: int | None = None
    arrivals: Arrivals | None = None
    duration_s: float | None = 10.0
    max_requests: int | None = None
    warmup_s: float = 0.0
    cooldown_s: float = 0.0

    @property
    def open_loop(self) -> bool:
        return self.arrivals is not None

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "arrivals"}
        out["arrivals"] = self.arrivals.__dict__ if self.arrivals else None
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Stage:
        arrivals = Arrivals(**data["arrivals"]) if data.get("arrivals") else None
        return cls(**{**data, "arrivals": arrivals})


@dataclass
class StageRun:
    """What running a stage measured about the harness (metrics come from the records)."""

    name: str
    t_start_ns: int = 0  # the stage's time origin
    t_stop_ns: int = 0  # when issuing stopped (planned end or last scheduled send)
    t_end_ns: int = 0  # when the last request finished
    sent: int = 0
    cpu_s: float = 0.0  # process CPU time over the stage (all load processes summed)
    wall_s: float = 0.0
    lags_ns: list[int] = field(default_factory=list)
    capped: int = 0  # open-loop requests that waited for a max_in_flight slot
    requested_rate: float | None = None
    precise_timer: bool = True
    processes: int = 1
    cpu_fraction_max: float = 0.0  # the busiest load process's CPU / wall
    load_average: float | None = None  # the machine's 1-minute load average at the end


@dataclass
class Options:
    """How requests are sent (the same for every stage)."""

    api: str = "completions"
    stream: bool = True
    timeout_s: float = 60.0
    max_in_flight: int = 1024
    keep_text: bool = False
    #: The run's request ids are ``<request_ids>-<n>`` (n: the request's global number): the
    #: ``x-request-id`` header (gRPC metadata for tgis) and the record's ``request_id``.
    request_ids: str = "tb"
    proc: int = 0  # this load process's index …
    procs: int = 1  # … of this many


class LoadGenerator:
    """Sends the prepared requests of one process and writes a record for each."""

    def __init__(
        self,
        pool: Sender,
        items: list[Item],
        payloads: list[bytes],
        counter: TokenCounter,
        write: RecordSink,
        options: Options,
        secrets: list[str] | None = None,
    ) -> None:
        self._pool, self._items, self._payloads = pool, items, payloads
        #: what the headers' references resolved to: an error that quotes one is masked
        self._secrets = secrets or []
        self._counter, self._write, self._opt = counter, write, options
        self._api = APIS[options.api]
        self._make_sink = _sink_factory(self._api, options.stream)
        # what each request allows its answer (checked by its sink when it ends)
        self._limits = [_limits(self._api, item) for item in items]
        self._next = options.proc  # global request number; processes interleave
        self.lags: list[int] = []
        self.capped = 0
        self._prepared: tuple[Stage, int, list[int]] | None = None

    async def prepare(self, stage: Stage, seed: int = 0) -> None:
        """Plan the stage's arrivals and open its connections, before its clock starts (a
        connection storm at the start would show up as schedule lag)."""
        offsets: list[int] = []
        if stage.arrivals is not None:
            offsets = offsets_ns(stage.arrivals, stage.duration_s, stage.max_requests, seed)
            per_s = _rate_of(offsets, stage) / self._opt.procs
            await self._pool.warm(min(self._opt.max_in_flight, max(4, int(per_s / 4))))
        else:
            await self._pool.warm(self._share(stage.concurrency or 1))
        self._prepared = (stage, seed, offsets)

    async def run(self, stage: Stage, t0_ns: int | None = None, seed: int = 0) -> StageRun:
        """Run ``stage``; all processes of one stage share ``t0_ns`` (monotonic clocks are
        system-wide on Linux, so their records merge exactly)."""
        if self._prepared is None or self._prepared[:2] != (stage, seed):
            await self.prepare(stage, seed)
        assert self._prepared is not None
        offsets = self._prepared[2]
        self._prepared = None
        self.lags, self.capped = [], 0
        t0 = t0_ns if t0_ns is not None else monotonic_ns()
        cpu0, wall0 = time.process_time(), monotonic_ns()
        run = StageRun(stage.name, t_start_ns=t0, processes=self._opt.procs)
        with _no_gc_pauses():
            if stage.open_loop:
                await self._open_loop(stage, t0, offsets, run)
            else:
                await self._closed_loop(stage, t0, run)
            # the stage ends with its last request, before the collection that follows it
            run.t_end_ns = monotonic_ns()
            run.cpu_s = time.process_time() - cpu0
        run.wall_s = (run.t_end_ns - wall0) / 1e9
        run.cpu_fraction_max = run.cpu_s / run.wall_s if run.wall_s > 0 else 0.0
        run.load_average = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        run.lags_ns, run.capped = self.lags, self.capped
        return run

    def _share(self, total: int) -> int:
        """This process's part of ``total`` (workers or requests) split between processes."""
        procs, proc = self._opt.procs, self._opt.proc
        return total // procs + (1 if proc < total % procs else 0)

    # -- closed loop ------------------------------------------------------------------------
    async def _closed_loop(self, stage: Stage, t0: int, run: StageRun) -> None:
        mine = self._share(stage.concurrency or 1)
        stop_ns = t0 + round(stage.duration_s * 1e9) if stage.duration_s else None
        budget = self._share(stage.max_requests) if stage.max_requests is not None else -1
        left = [budget]
        now = monotonic_ns()
        if now < t0:
            await asyncio.sleep((t0 - now) / 1e9)

        async def worker() -> None:
            free_since = max(t0, monotonic_ns())
            while left[0] != 0 and (stop_ns is None or monotonic_ns() < stop_ns):
                left[0] -= 1
                await self._one(stage.name, free_since, 0)
                free_since = monotonic_ns()

        async with asyncio.TaskGroup() as group:
            for _ in range(mine):
                group.create_task(worker())
        run.sent = len(self.lags)
        # a stage bounded by its request count ends when its last request does
        run.t_stop_ns = min(stop_ns or monotonic_ns(), monotonic_ns())

    # -- open loop --------------------------------------------------------------------------
    async def _open_loop(self, stage: Stage, t0: int, offsets: list[int], run: StageRun) -> None:
        mine = offsets[self._opt.proc :: self._opt.procs]
        run.requested_rate = _rate_of(offsets, stage)
        slots = asyncio.Semaphore(self._opt.max_in_flight)
        timer = PreciseTimer()
        run.precise_timer = timer.precise
        try:
            async with asyncio.TaskGroup() as group:
                for offset in mine:
                    due = t0 + offset
                    if due > monotonic_ns():
                        await timer.sleep_until(due)
                    else:  # late: send now, but let responses in flight be read first
                        await asyncio.sleep(0)
                    group.create_task(self._slotted(stage.name, due, slots))
        finally:
            timer.close()
        run.sent = len(mine)
        run.t_stop_ns = t0 + _span_ns(offsets, stage)

    async def _slotted(self, stage: str, due: int, slots: asyncio.Semaphore) -> None:
        if slots.locked():
            self.capped += 1
            waited_from = monotonic_ns()
            async with slots:
                await self._one(stage, due, monotonic_ns() - waited_from)
        else:
            async with slots:
                await self._one(stage, due, 0)

    # -- one request ------------------------------------------------------------------------
    async def _one(self, stage: str, scheduled: int, queued: int) -> None:
        number = self._next
        self._next += self._opt.procs
        index = number % len(self._items)
        asked, payload, limits = self._items[index], self._payloads[index], self._limits[index]
        # a plain load's records have the fields of sessions too, null (one schema)
        await self._send(stage, scheduled, queued, number, asked, payload, limits, index)

    async def _send(
        self,
        stage: str,
        scheduled: int,
        queued: int,
        number: int,
        asked: Item,
        payload: bytes,
        limits: Limits | Expect,
        item: int,
        session: int | None = None,
        turn: int | None = None,
    ) -> tuple[Response, LoadRecord]:
        """Send one request, write its record (``item``: where it comes from in the
        dataset; ``session`` and ``turn``: a session's); the answer and the record, for a
        caller that goes on from them (a session's next turn)."""
        sink = self._make_sink(limits)
        error: str | None = None
        kind: ErrorKind | None = None
        request_id = f"{self._opt.request_ids}-{number}"
        try:
            await self._pool.send(payload, sink, self._opt.timeout_s, request_id)
        except ReadTimeout as exc:
            error, kind = f"timeout after {self._opt.timeout_s:g} s", exc.kind
        except HttpClientError as exc:
            error, kind = str(exc) or type(exc).__name__, exc.kind
        except OSError as exc:  # the transport failed after it connected
            error, kind = str(exc) or type(exc).__name__, "protocol"
        response = sink.response
        sent = response.t_sent_ns
        if sent:
            self.lags.append(sent - scheduled - queued - response.connect_ns)
        place: RequestPlace = {
            "stage": stage,
            "n": number,
            "request_id": request_id,
            "proc": self._opt.proc,
            "item": item,
            "session": session,
            "turn": turn,
            "scheduled_ns": scheduled,
            "queued_ns": queued,
        }
        record = request_record(response, error, asked, self._counter, self._api, place, kind)
        if self._opt.keep_text:
            record["text"] = response.text
        if self._secrets and record["error"]:  # only a failed request pays for this
            record["error"] = mask(record["error"], self._secrets)
        self._write(record)
        return response, record


@contextlib.contextmanager
def _no_gc_pauses() -> Iterator[None]:
    """No cyclic garbage collection while a stage runs: a full collection over thousands of
    live records stalls the loop for milliseconds, which would show up as send lag and
    late chunk timestamps. Per-request objects are acyclic and freed by reference counting;
    what cycles remain are collected once the stage is over."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
        gc.collect()


def _ended_by_count(offsets: list[int], stage: Stage) -> bool:
    """Whether an open-loop schedule ends with its request count (not its duration)."""
    if not stage.duration_s:
        return True
    return stage.max_requests is not None and len(offsets) >= stage.max_requests


def _span_ns(offsets: list[int], stage: Stage) -> int:
    """How long an open-loop stage issues requests, from its start: its whole duration when
    that ended the schedule, else up to its last send — a count reached long before the
    duration must not leave the idle rest inside the window (its rates would be diluted)."""
    if _ended_by_count(offsets, stage):
        return offsets[-1] if offsets else 0
    return round((stage.duration_s or 0.0) * 1e9)


def _rate_of(offsets: list[int], stage: Stage) -> float:
    """Requested rate of a schedule: arrivals per second of its duration, or, when its count
    ended it, the gaps between its first and last arrival per second of that span."""
    if not _ended_by_count(offsets, stage):
        return len(offsets) / (stage.duration_s or 1.0)
    return (len(offsets) - 1) / (offsets[-1] / 1e9) if len(offsets) > 1 and offsets[-1] else 0.0


def _sink_factory(api: Api, stream: bool) -> Callable[[Any], AnySink]:
    """Sinks that keep no raw chunks: the text (``keep_text``) is joined from the content
    chunks, and raw JSON would cost memory and CPU on the hot path. An embeddings answer is
    one body, whatever ``stream`` says; its sink keeps no vectors."""
    sink = api.sink
    return lambda limits: sink(stream=stream, keep_raw=False, limits=limits)


def _limits(api: Api, item: Item) -> Limits | Expect:
    """What the answer to ``item`` may hold: its output tokens; an embeddings batch's vectors."""
    return embeddings.expect(item) if api.embeds else Limits(item.output_tokens)
