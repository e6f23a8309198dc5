"""Watches read and stamped in a child process that does nothing else.

A sampler's times are only as good as the moment it notes that a change arrived. Inside one
process that moment waits for whatever else holds the interpreter — parsing a relist of
thousands of pods, merging and writing ``sampled.json`` — and changes were seen stamped
40–80 ms after the server sent them. Here a child process runs one :class:`RawWatcher`
thread per resource: it reads bytes and stamps each line as it arrives, passing it on
unparsed; a LIST goes on as one blob whose resourceVersion is found without parsing it, so
the next WATCH opens at once (changes in a relist's gap are not stamped late either). A
sender thread writes everything to a pipe. The parent parses it on its own time into the
same :class:`~testbed.clients.kube.watch.Seen`/``Synced``/``Failed`` items a
:class:`~testbed.clients.kube.watch.Watcher` yields, so a consumer cannot tell the
difference — except that the receive times stay true while it is busy.
"""

from __future__ import annotations

import contextlib
import copy
import multiprocessing
import queue
import re
import signal
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import orjson

from testbed.clients.kube.rest import KindInfo, Kube, list_items
from testbed.clients.kube.watch import Failed, Seen, Sink, Synced, Watcher, now_ms
from testbed.core.errors import ClusterError

STOP_GRACE_S = 5.0
_LIST_VERSION = re.compile(rb'"resourceVersion"\s*:\s*"([^"]*)"')


@dataclass(frozen=True)
class WatchSpec:
    """One resource to watch: the consumer's tag, the kind, where, and which objects."""

    tag: str
    info: KindInfo
    namespace: str | None
    selector: str | None


@dataclass(frozen=True, slots=True)
class Listed:
    """A LIST's body as it came, and when it arrived (in the child)."""

    tag: str
    data: bytes
    received_ms: float


@dataclass(frozen=True, slots=True)
class Line:
    """One watch event's line as it came, and when it arrived (in the child)."""

    tag: str
    data: bytes
    received_ms: float


def list_version(data: bytes) -> str:
    """A list's resourceVersion, read from the bytes before its items when it is there (the
    API server writes ``metadata`` first), else from the parsed whole."""
    items_at = data.find(b'"items"')
    found = _LIST_VERSION.search(data, 0, items_at if items_at >= 0 else len(data))
    if found is not None and items_at >= 0:
        return found.group(1).decode()
    metadata = orjson.loads(data).get("metadata") or {}
    return str(metadata.get("resourceVersion", ""))


class RawWatcher(Watcher):
    """A :class:`Watcher` that passes lines and lists on as bytes, stamped, unparsed (only a
    watch line is parsed, for its type and resourceVersion)."""

    def _list(self) -> str:
        path = self.info.collection(self.namespace if self.info.namespaced else None)
        raw = self.kube.request(
            "GET", path, f"list {self.info.plural}", query={"labelSelector": self.selector}
        )
        data = raw.data
        received = now_ms()
        self.out.put(Listed(self.tag, data, received))  # type: ignore[arg-type]
        return list_version(data)

    def _line(self, line: bytes, received: float, version: str) -> str:
        event = orjson.loads(line)
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            return self._one(event, received, version)  # raises the Status it carries
        version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
        if kind != "BOOKMARK":
            self.events += 1
            self.out.put(Line(self.tag, line, received))  # type: ignore[arg-type]
        return version


class StampedWatches:
    """The child process and the parent's receiver thread that turns its messages into
    ``Seen``/``Synced``/``Failed`` items on ``out``."""

    def __init__(self, kube: Kube, specs: list[WatchSpec], out: Sink) -> None:
        self.specs, self.out = {s.tag: s for s in specs}, out
        context = multiprocessing.get_context("spawn")  # never fork a process with threads
        self._conn, child_end = context.Pipe(duplex=True)
        self._child = context.Process(
            target=_child_main,
            args=(child_end, _portable(kube.api.configuration), specs),
            name="testbed-watch",
            daemon=True,
        )
        self._child_end = child_end
        self._receiver = threading.Thread(target=self._receive, name="watch-receiver", daemon=True)
        self.child_cpu_s = 0.0
        self.receiver_cpu_s = 0.0

    @property
    def cpu_s(self) -> float:
        """CPU of the child (reading, stamping) and of the receiver thread (parsing)."""
        return self.child_cpu_s + self.receiver_cpu_s

    def start(self) -> None:
        self._child.start()
        self._child_end.close()  # the child holds its end: EOF here once it exits
        self._receiver.start()

    def stop(self) -> None:
        """Ask the child to stop; what it already read still reaches ``out`` (see join)."""
        with contextlib.suppress(OSError):
            self._conn.send(("stop",))

    def join(self) -> None:
        self._child.join(STOP_GRACE_S)
        if self._child.is_alive():  # stuck in a read the stop did not interrupt
            self._child.kill()
            self._child.join()
        self._receiver.join(STOP_GRACE_S)

    def _receive(self) -> None:
        try:
            while True:
                try:
                    message = self._conn.recv()
                except (EOFError, OSError):
                    return
                self._take(message)
        except Exception as exc:  # a bug must reach the consumer, not die in a thread
            self.out.put(Failed("watch", ClusterError(f"watch receiver: {exc!r}")))
        finally:
            self.receiver_cpu_s = time.thread_time()

    def _take(self, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "list":
            _, tag, data, received = message
            for item in list_items(orjson.loads(data), self.specs[tag].info):
                self.out.put(Seen(tag, "ADDED", item, received, live=False))
            self.out.put(Synced(tag))
        elif kind == "line":
            _, tag, data, received = message
            event = orjson.loads(data)
            obj = event.get("object") or {}
            self.out.put(Seen(tag, str(event.get("type")), obj, received, live=True))
        elif kind == "failed":
            _, tag, text, status = message
            self.out.put(Failed(tag, ClusterError(text, status)))
        elif kind == "done":
            self.child_cpu_s = float(message[1])


def _portable(configuration: Any) -> Any:
    """The client configuration, fit to cross into the child (a kubeconfig's token refresher
    stays behind: the token it set goes along)."""
    config = copy.copy(configuration)
    config.refresh_api_key_hook = None
    return config


# -- the child ------------------------------------------------------------------------------


def _child_main(conn: Connection, configuration: Any, specs: list[WatchSpec]) -> None:
    """Read and stamp until the parent says stop or goes away; then report CPU and exit."""
    from kubernetes import client

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    kube = Kube(client.ApiClient(configuration))
    out: queue.SimpleQueue[Any] = queue.SimpleQueue()
    watchers = [RawWatcher(kube, s.info, s.namespace, s.selector, out, s.tag) for s in specs]
    threading.Thread(target=_await_stop, args=(conn, watchers, out), daemon=True).start()
    for watcher in watchers:
        watcher.start()
    try:
        while (item := out.get()) is not None:
            conn.send(_message(item))
        for watcher in watchers:
            watcher.join(STOP_GRACE_S)
        while True:  # what the watchers read before they stopped
            try:
                item = out.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                conn.send(_message(item))
        conn.send(("done", time.process_time()))
    except (BrokenPipeError, OSError):
        pass  # the parent is gone: nobody to tell


def _await_stop(conn: Connection, watchers: list[RawWatcher], out: queue.SimpleQueue[Any]) -> None:
    with contextlib.suppress(EOFError, OSError):
        conn.recv()
    for watcher in watchers:
        watcher.stop()
    out.put(None)


def _message(item: Listed | Line | Failed | Synced) -> tuple[Any, ...]:
    if isinstance(item, Listed):
        return ("list", item.tag, item.data, item.received_ms)
    if isinstance(item, Line):
        return ("line", item.tag, item.data, item.received_ms)
    if isinstance(item, Failed):
        return ("failed", item.tag, str(item.error), item.error.status)
    return ("synced", item.tag)  # a RawWatcher's list is its Listed; never sent in practice
