"""A container's log followed into a file (``kubectl logs -f`` into the run directory).

A daemon thread streams ``pods/<name>/log?follow=true`` and appends each chunk to the file
as it arrives, so the pipeline can slice what a treatment produced while it ran. Closing
shuts the HTTP response down, which ends the thread at once.
"""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from typing import Any

from testbed.clients.kube.rest import Kube
from testbed.core.errors import ClusterError


class LogFollower:
    """Appends ``namespace/pod`` container ``container``'s output to ``path`` until closed."""

    def __init__(self, kube: Kube, namespace: str, pod: str, container: str, path: Path) -> None:
        self.kube, self.namespace, self.pod = kube, namespace, pod
        self.container, self.path = container, path
        self._response: Any = None
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"log-{pod}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        query = {"container": self.container, "follow": "true"}
        try:
            response = self.kube.request(
                "GET",
                f"/api/v1/namespaces/{self.namespace}/pods/{self.pod}/log",
                f"follow the log of pod {self.pod}",
                query=query,
                timeout=(10.0, None),  # type: ignore[arg-type]
            )
        except ClusterError as exc:
            self._append(f"\n[testbed] cannot follow the log: {exc}\n".encode())
            return
        with self._lock:
            self._response = response
        if self._closed.is_set():
            response.close()
        with contextlib.suppress(Exception):  # a closed stream simply ends the log
            for chunk in response.stream(8192, decode_content=True):
                self._append(chunk)

    def _append(self, data: bytes) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("ab") as handle:
            handle.write(data)

    def close(self) -> None:
        """Stop following; what was streamed so far is in the file."""
        self._closed.set()
        with self._lock:
            response = self._response
        if response is not None:
            with contextlib.suppress(Exception):
                response.shutdown()
                response.close()
        self._thread.join(timeout=2.0)
