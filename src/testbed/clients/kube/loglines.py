"""A container's log, followed line by line into asyncio (``kubectl logs -f`` as a stream).

A daemon thread reads ``pods/<name>/log?follow=true`` and hands each whole line to the event
loop as it arrives; the stream ends when the container ends (the server closes it) or when
:meth:`LogLines.close` shuts the response down, which ends the thread at once. A dropped
connection ends the stream too: the caller decides from the pod whether to follow again.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator
from typing import Any

from testbed.clients.kube.rest import Kube
from testbed.core.errors import ClusterError

_END = object()


class LogLines:
    """``async for line in LogLines(kube, ns, pod, container)``: decoded lines, no newline."""

    def __init__(self, kube: Kube, namespace: str, pod: str, container: str) -> None:
        self.kube, self.namespace, self.pod, self.container = kube, namespace, pod, container
        self.error: ClusterError | None = None  # why following failed, if it did
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._loop = asyncio.get_running_loop()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._response: Any = None
        self._thread = threading.Thread(target=self._run, name=f"loglines-{pod}", daemon=True)
        self._thread.start()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[str]:
        while True:
            item = await self._queue.get()
            if item is _END:
                return
            yield item

    def _post(self, item: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody listens any more
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)

    def _run(self) -> None:
        try:
            response = self.kube.request(
                "GET",
                f"/api/v1/namespaces/{self.namespace}/pods/{self.pod}/log",
                f"follow the log of pod {self.pod}",
                query={"container": self.container, "follow": "true"},
                timeout=(10.0, None),  # type: ignore[arg-type]
            )
        except ClusterError as exc:
            self.error = exc
            self._post(_END)
            return
        with self._lock:
            self._response = response
        if self._closed.is_set():
            response.close()
        pending = b""
        with contextlib.suppress(Exception):  # a closed stream simply ends the log
            for chunk in response.stream(65536, decode_content=True):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    self._post(line.decode("utf-8", "replace"))
        if pending:
            self._post(pending.decode("utf-8", "replace"))
        with contextlib.suppress(Exception):
            response.release_conn()
        self._post(_END)

    def close(self) -> None:
        """Stop following (idempotent)."""
        self._closed.set()
        with self._lock:
            response = self._response
        if response is not None:
            with contextlib.suppress(Exception):
                response.shutdown()
                response.close()
        self._thread.join(timeout=2.0)
