"""Change events and the watches that receive them.

Every write makes one :class:`Event` holding the new object (and the previous one, so a
watch with a selector sees an object leave its selection as DELETED and enter it as ADDED,
as the real server reports it). An event's JSON line is serialised once and shared by
every watch that receives it. A :class:`Watch` is an async iterator over its events.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from kubemu.storage.selectors import Matcher

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"
BOOKMARK = "BOOKMARK"
ERROR = "ERROR"


@dataclass(slots=True)
class Event:
    """One change: ``type`` is ADDED, MODIFIED, DELETED (BOOKMARK, ERROR on the wire)."""

    type: str
    object: dict[str, Any]
    rv: int
    old: dict[str, Any] | None = None
    _line: bytes | None = field(default=None, repr=False)

    def line(self) -> bytes:
        """``{"type": …, "object": …}`` and a newline, as a watch stream carries it."""
        if self._line is None:
            self._line = orjson.dumps({"type": self.type, "object": self.object}) + b"\n"
        return self._line


class EventLog:
    """The recent events of one resource type, for watches that resume from a version."""

    def __init__(self, capacity: int) -> None:
        self._events: deque[Event] = deque(maxlen=capacity)
        #: Events at or below this version are no longer kept (a resume from there is 410).
        self.floor = 0

    def append(self, event: Event) -> None:
        if len(self._events) == self._events.maxlen:
            self.floor = self._events[0].rv
        self._events.append(event)

    def since(self, rv: int) -> list[Event] | None:
        """Events after ``rv``, or None when some of them were already dropped."""
        if rv < self.floor:
            return None
        if not self._events or self._events[-1].rv <= rv:
            return []
        # Versions are increasing: walk back from the newest (resumes are usually recent).
        out: list[Event] = []
        for event in reversed(self._events):
            if event.rv <= rv:
                break
            out.append(event)
        out.reverse()
        return out


class Watch:
    """A subscription to one resource type, optionally narrowed to a namespace and selectors.

    Iterate it (``async for event in watch``) to receive events; :meth:`close` ends it and
    unregisters it from the store. Events are queued without bound, so a slow reader costs
    memory, never a lost event.
    """

    def __init__(
        self,
        namespace: str | None,
        matcher: Matcher | None,
        unregister: Callable[[Watch], None],
    ) -> None:
        self.namespace = namespace
        self.matcher = matcher
        self._queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self._unregister = unregister
        self.closed = False

    def _selects(self, obj: dict[str, Any] | None) -> bool:
        if obj is None:
            return False
        if self.namespace is not None and obj["metadata"].get("namespace") != self.namespace:
            return False
        return self.matcher is None or self.matcher(obj)

    def offer(self, event: Event) -> None:
        """Queue ``event`` if it concerns this watch (translated across selector edges)."""
        now = self._selects(event.object)
        if event.type != MODIFIED or self.matcher is None:
            if now:
                self._queue.put_nowait(event)
            return
        before = self._selects(event.old)
        if now and before:
            self._queue.put_nowait(event)
        elif now:
            self._queue.put_nowait(Event(ADDED, event.object, event.rv))
        elif before:
            self._queue.put_nowait(Event(DELETED, event.object, event.rv))

    def push(self, event: Event) -> None:
        """Queue ``event`` unconditionally (initial state, bookmarks)."""
        self._queue.put_nowait(event)

    def pending(self) -> int:
        return self._queue.qsize()

    def get_nowait(self) -> Event | None:
        """The next queued event, or None when none is queued (or the watch ended)."""
        try:
            return self._queue.get_nowait()
        except asyncio.QueueEmpty:
            return None

    async def next(self, timeout_s: float | None = None) -> Event | None:
        """The next event; None when the watch was closed or ``timeout_s`` passed first."""
        if self.closed and self._queue.empty():
            return None
        if timeout_s is None:
            return await self._queue.get()
        try:
            async with asyncio.timeout(timeout_s):
                return await self._queue.get()
        except TimeoutError:
            return None

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._unregister(self)
            self._queue.put_nowait(None)

    def __aiter__(self) -> Watch:
        return self

    async def __anext__(self) -> Event:
        event = await self.next()
        if event is None:
            raise StopAsyncIteration
        return event
