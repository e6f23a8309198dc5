"""List-then-watch of any resource, each event stamped with the wall time it arrived.

The one watch loop of testbed. :class:`Watcher` is a daemon thread that lists, then watches
from that resourceVersion with bookmarks, resumes after a timeout and lists again after
410 Gone, and puts ``Seen`` items into a sink (a queue, or the event loop through
:class:`~testbed.clients.kube.changes.Changes`). Every item says when its line arrived
(taken as it is read, before parsing, so a busy consumer does not age it) and whether it
was *live* (seen by the watch as it happened) or *listed* (the state a LIST returned, whose
receive time says nothing about when it happened). ``stop()`` closes the HTTP response, so
the thread ends at once — a Ctrl-C never waits for a watch to time out.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from testbed.clients.kube.errors import from_status
from testbed.clients.kube.rest import KindInfo, Kube, interrupt
from testbed.core.errors import ClusterError

WATCH_WINDOW_S = 60  # one watch request lasts this long before it is renewed


@dataclass(frozen=True, slots=True)
class Seen:
    """One object as a watch delivered it."""

    tag: str  # the consumer's name for this watcher ("pods", "events", "Job")
    type: str  # ADDED, MODIFIED, DELETED (listed objects come as ADDED)
    obj: dict[str, Any]
    received_ms: float  # wall-clock epoch milliseconds when its line arrived
    live: bool  # False for objects of an initial or repeated LIST


@dataclass(frozen=True, slots=True)
class Failed:
    """The watcher stopped on an error the consumer must report."""

    tag: str
    error: ClusterError


@dataclass(frozen=True, slots=True)
class Synced:
    """The watcher's LIST is delivered: every object that existed is on the queue."""

    tag: str


class Sink(Protocol):
    """Where a watcher puts its items (``queue.SimpleQueue`` is one); called from its thread."""

    def put(self, item: Seen | Failed | Synced, /) -> None: ...


def now_ms() -> float:
    """Wall-clock epoch milliseconds: a label comparable with the API's timestamps."""
    return time.time_ns() / 1e6


class Watcher(threading.Thread):
    """``Seen`` items of one resource (in a namespace, matching a selector) into ``out``."""

    def __init__(
        self,
        kube: Kube,
        info: KindInfo,
        namespace: str | None,
        label_selector: str | None,
        out: Sink,
        tag: str,
    ) -> None:
        super().__init__(name=f"watch-{tag}", daemon=True)
        self.kube, self.info, self.namespace = kube, info, namespace
        self.selector, self.out, self.tag = label_selector, out, tag
        self._stop_flag = threading.Event()
        self._lock = threading.Lock()
        self._response: Any = None
        self.events = 0  # watch events received (not listed objects)
        self.cpu_s = 0.0  # set when the thread ends

    def stop(self) -> None:
        """End the watch now (idempotent, from any thread)."""
        self._stop_flag.set()
        with self._lock:
            response = self._response
        if response is not None:
            interrupt(response)

    def run(self) -> None:
        try:
            version = ""
            while not self._stop_flag.is_set():
                if not version:
                    version = self._list()
                version = self._watch_once(version)
        except ClusterError as exc:
            if not self._stop_flag.is_set():
                self.out.put(Failed(self.tag, exc))
        except Exception as exc:  # a bug must reach the consumer, not die in a thread
            if not self._stop_flag.is_set():
                self.out.put(Failed(self.tag, ClusterError(f"watch {self.tag}: {exc!r}")))
        finally:
            self.cpu_s = time.thread_time()  # this thread's CPU: reading, parsing, queueing

    def _list(self) -> str:
        items, version = self.kube.list_collection(self.info, self.namespace, self.selector)
        received = now_ms()
        for item in items:
            self.out.put(Seen(self.tag, "ADDED", item, received, live=False))
        self.out.put(Synced(self.tag))
        return version

    def _watch_once(self, version: str) -> str:
        """One watch request; the version to resume from ('' = list again)."""
        path = self.info.collection(self.namespace if self.info.namespaced else None)
        query = {
            "watch": "true",
            "labelSelector": self.selector,
            "resourceVersion": version,
            "timeoutSeconds": WATCH_WINDOW_S,
            "allowWatchBookmarks": "true",
        }
        try:
            raw = self.kube.request(
                "GET", path, f"watch {self.tag}", query=query, timeout=(10.0, WATCH_WINDOW_S + 10.0)
            )
        except ClusterError as exc:
            if exc.status == 410:
                return ""
            raise
        with self._lock:
            self._response = raw
        if self._stop_flag.is_set():
            raw.close()
        try:
            return self._read(raw, version)
        finally:
            with self._lock:
                self._response = None
            with contextlib.suppress(Exception):
                raw.release_conn()

    def _read(self, raw: Any, version: str) -> str:
        pending = b""
        try:
            for chunk in raw.stream(65536, decode_content=True):
                received = now_ms()
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip():
                        version = self._line(line, received, version)
        except ClusterError as exc:
            if exc.status == 410:
                return ""
            raise
        except Exception:  # a closed or dropped stream ends this request; the loop re-watches
            if self._stop_flag.is_set():
                return version
            time.sleep(0.2)  # do not spin on a server that drops every connection
        return version

    def _line(self, line: bytes, received: float, version: str) -> str:
        return self._one(orjson.loads(line), received, version)

    def _one(self, event: dict[str, Any], received: float, version: str) -> str:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            raise from_status(int(obj.get("code") or 500), obj, f"watch {self.tag}")
        version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
        if kind != "BOOKMARK":
            self.events += 1
            self.out.put(Seen(self.tag, str(kind), obj, received, live=True))
        return version
