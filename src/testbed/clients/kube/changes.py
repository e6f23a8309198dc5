"""Changes of objects as an async stream: list once, then watch from that resourceVersion.

The official client is synchronous, so a daemon thread runs the list-and-watch loop and
hands each event to the event loop. A watch that times out resumes from the last
resourceVersion seen (bookmarks included); an expired one (410 Gone) lists again and
replays the current objects as ``ADDED``. Closing the stream closes the HTTP response, so
the thread ends at once — a Ctrl-C never waits for a watch to time out.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator
from typing import Any

from testbed.clients.kube.rest import Kube
from testbed.core.errors import ClusterError

WATCH_WINDOW_S = 60  # seconds one watch request lasts before it is renewed
_END = object()


class Changes:
    """``async for kind, obj in changes`` — ADDED, MODIFIED, DELETED events of one kind."""

    def __init__(
        self, kube: Kube, kind: str, namespace: str | None, label_selector: str | None
    ) -> None:
        self.kube, self.kind = kube, kind
        self.namespace, self.selector = namespace, label_selector
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._loop = asyncio.get_running_loop()
        self._stop = threading.Event()
        self._response: Any = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"watch-{kind}", daemon=True)
        self._thread.start()

    def __aiter__(self) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        while True:
            item = await self._queue.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    async def next(self, wait_s: float) -> tuple[str, dict[str, Any]] | None:
        """The next event, or None when ``wait_s`` seconds pass first (the stream goes on)."""
        try:
            item = await asyncio.wait_for(self._queue.get(), wait_s)
        except TimeoutError:
            return None
        if item is _END:
            self._queue.put_nowait(_END)  # every later call ends too
            raise ClusterError(f"the {self.kind} watch ended")
        if isinstance(item, BaseException):
            raise item
        result: tuple[str, dict[str, Any]] = item
        return result

    def close(self) -> None:
        """Stop watching (idempotent; safe from the event loop)."""
        self._stop.set()
        with self._lock:
            response = self._response
        if response is not None:
            # shutdown() interrupts a read blocked in another thread; close() alone may not.
            with contextlib.suppress(Exception):
                if hasattr(response, "shutdown"):
                    response.shutdown()
                response.close()

    def _post(self, item: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody listens any more
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)

    def _run(self) -> None:
        try:
            version = ""
            while not self._stop.is_set():
                if not version:
                    items, version = self.kube.list_objects(
                        self.kind, self.namespace, self.selector
                    )
                    for item in items:
                        self._post(("ADDED", item))
                version = self._watch_once(version)
        except ClusterError as exc:
            if not self._stop.is_set():
                self._post(exc)
        except Exception as exc:  # a bug must reach the awaiting task, not die in a thread
            if not self._stop.is_set():
                self._post(ClusterError(f"watch {self.kind} failed: {exc!r}"))
        finally:
            self._post(_END)

    def _watch_once(self, version: str) -> str:
        """One watch request; the version to resume from ('' = list again)."""
        try:
            response, events = self.kube.watch_lines(
                self.kind,
                self.namespace,
                label_selector=self.selector,
                resource_version=version,
                timeout_s=WATCH_WINDOW_S,
            )
        except ClusterError as exc:
            if exc.status == 410:
                return ""
            raise
        with self._lock:
            self._response = response
        if self._stop.is_set():
            response.close()
        try:
            for event in events:
                obj = event.get("object") or {}
                version = str(obj.get("metadata", {}).get("resourceVersion") or version)
                if event.get("type") == "BOOKMARK":
                    continue
                obj.setdefault("kind", self.kind)
                self._post((str(event.get("type")), obj))
        except ClusterError as exc:
            if exc.status == 410:
                return ""
            raise
        finally:
            with self._lock:
                self._response = None
        return version
