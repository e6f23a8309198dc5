"""A container's log, followed as it is written (``kubectl logs -f``).

:class:`LogStream` is the one follower: a daemon thread reads ``pods/<name>/log?follow=true``
and hands each chunk to a callback as it arrives. The stream ends when the container ends
(the server closes it), when the connection drops (the caller decides from the pod whether
to follow again) or when :meth:`LogStream.close` shuts the response down, which ends the
thread at once. Two faces of it: :func:`follow_into` appends the log to a file of the run
directory, so the pipeline can slice what a treatment produced while it ran;
:class:`LogLines` yields whole lines to asyncio.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from testbed.clients.kube.rest import Kube, interrupt
from testbed.core.errors import ClusterError


class LogStream(threading.Thread):
    """``on_chunk(bytes)`` for each piece of the log, then ``on_end(error or None)`` once."""

    def __init__(
        self,
        kube: Kube,
        namespace: str,
        pod: str,
        container: str,
        on_chunk: Callable[[bytes], None],
        on_end: Callable[[ClusterError | None], None],
    ) -> None:
        super().__init__(name=f"log-{pod}", daemon=True)
        self.kube, self.namespace, self.pod, self.container = kube, namespace, pod, container
        self.on_chunk, self.on_end = on_chunk, on_end
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._response: Any = None

    def run(self) -> None:
        try:
            response = self.kube.request(
                "GET",
                f"/api/v1/namespaces/{self.namespace}/pods/{self.pod}/log",
                f"follow the log of pod {self.pod}",
                query={"container": self.container, "follow": "true"},
                timeout=(10.0, None),  # type: ignore[arg-type]
            )
        except ClusterError as exc:
            self.on_end(exc)
            return
        with self._lock:
            self._response = response
        if self._closed.is_set():
            response.close()
        with contextlib.suppress(Exception):  # a closed or dropped stream simply ends the log
            for chunk in response.stream(65536, decode_content=True):
                self.on_chunk(chunk)
        with contextlib.suppress(Exception):
            response.release_conn()
        self.on_end(None)

    def close(self) -> None:
        """Stop following (idempotent); what was streamed so far has been handed over."""
        self._closed.set()
        with self._lock:
            response = self._response
        if response is not None:
            interrupt(response)
        if self.is_alive() and self is not threading.current_thread():
            self.join(timeout=2.0)


def follow_into(kube: Kube, namespace: str, pod: str, container: str, path: Path) -> LogStream:
    """Append the container's output to ``path`` until closed (started)."""

    def append(data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("ab") as handle:
            handle.write(data)

    def end(error: ClusterError | None) -> None:
        if error is not None:
            append(f"\n[testbed] cannot follow the log: {error}\n".encode())

    stream = LogStream(kube, namespace, pod, container, append, end)
    stream.start()
    return stream


_END = object()


class LogLines:
    """``async for line in LogLines(kube, ns, pod, container)``: decoded lines, no newline."""

    def __init__(self, kube: Kube, namespace: str, pod: str, container: str) -> None:
        self.error: ClusterError | None = None  # why following failed, if it did
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._loop = asyncio.get_running_loop()
        self._pending = b""
        self._stream = LogStream(kube, namespace, pod, container, self._chunk, self._end)
        self._stream.start()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[str]:
        while (item := await self._queue.get()) is not _END:
            yield item

    def _post(self, item: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody listens any more
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)

    def _chunk(self, data: bytes) -> None:
        *lines, self._pending = (self._pending + data).split(b"\n")
        for line in lines:
            self._post(line.decode("utf-8", "replace"))

    def _end(self, error: ClusterError | None) -> None:
        self.error = error
        if self._pending:
            self._post(self._pending.decode("utf-8", "replace"))
        self._post(_END)

    def close(self) -> None:
        """Stop following (idempotent)."""
        self._stream.close()
