"""Changes of objects as an async stream: the :class:`~testbed.clients.kube.watch.Watcher`
thread, its items handed to the event loop.

``async for type, obj in changes`` yields ADDED, MODIFIED and DELETED events: first the
objects a LIST found (as ADDED), then what the watch sees. A failed watch raises its
:class:`~testbed.core.errors.ClusterError` in the awaiting task, and again on every later
call. Closing the stream closes the HTTP response, so the thread ends at once, and ends the
iteration.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from testbed.clients.kube.rest import KindInfo, Kube, kind_info
from testbed.clients.kube.watch import Failed, Seen, Synced, Watcher
from testbed.core.errors import ClusterError


class Changes:
    """Watch events of one kind (in a namespace, matching a selector) for asyncio."""

    def __init__(
        self,
        kube: Kube,
        kind: str | KindInfo,
        namespace: str | None,
        label_selector: str | None,
    ) -> None:
        """``kind``: a kind testbed knows by name, or any resource found by discovery."""
        self._queue: asyncio.Queue[Seen | Failed | None] = asyncio.Queue()  # None: closed
        self._loop = asyncio.get_running_loop()
        self._failed: ClusterError | None = None
        info = kind_info(kind) if isinstance(kind, str) else kind
        tag = kind if isinstance(kind, str) else info.plural
        self._watcher = Watcher(kube, info, namespace, label_selector, self, tag)
        self._watcher.start()

    def put(self, item: Seen | Failed | Synced | None, /) -> None:
        """Called from the watcher's thread (and by :meth:`close`)."""
        if isinstance(item, Synced):
            return
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody listens any more
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)

    def __aiter__(self) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        while (item := await self._queue.get()) is not None:
            yield self._take(item)
        self._queue.put_nowait(None)  # every later call ends too

    async def next(self, wait_s: float) -> tuple[str, dict[str, Any]] | None:
        """The next event, or None when ``wait_s`` seconds pass first (the stream goes on)."""
        if self._failed is not None:
            raise self._failed
        try:
            async with asyncio.timeout(wait_s):  # not wait_for: it can lose a Ctrl-C on 3.11
                item = await self._queue.get()
        except TimeoutError:
            return None
        if item is None:
            self._queue.put_nowait(None)  # every later call ends too
            raise ClusterError(f"the {self._watcher.tag} watch was closed")
        return self._take(item)

    def _take(self, item: Seen | Failed) -> tuple[str, dict[str, Any]]:
        if isinstance(item, Failed):
            self._failed = item.error
            raise item.error
        return item.type, item.obj

    def close(self) -> None:
        """Stop watching (idempotent; safe from the event loop)."""
        self._watcher.stop()
        self.put(None)
