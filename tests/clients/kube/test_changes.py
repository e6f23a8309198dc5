"""A Ctrl-C that lands while a watch event is being delivered is not lost: the task waiting in
``Changes.next`` is cancelled, whichever loop iteration the cancellation falls on. Python
3.11's ``asyncio.wait_for`` returned the event instead (the run went on through readiness
and the whole treatment); ruff now bans it (pyproject.toml, banned-api)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from testbed.clients.kube.changes import Changes
from testbed.clients.kube.rest import KindInfo
from testbed.clients.kube.watch import Seen


class SilentKube:
    """Lists nothing until released: the watcher thread stays quiet while the test posts."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def list_collection(self, info: KindInfo, namespace: str | None, selector: str | None) -> Any:
        self.release.wait(30)
        return [], "1"


@pytest.mark.parametrize("turns", [0, 1, 2, 3])
async def test_a_cancel_as_an_event_arrives_is_not_lost(turns: int) -> None:
    kube = SilentKube()
    changes = Changes(kube, "Pod", "ns", None)  # type: ignore[arg-type]
    try:
        waiting = asyncio.ensure_future(changes.next(30))
        for _ in range(3):
            await asyncio.sleep(0)  # the task waits in next()
        changes.put(Seen("Pod", "ADDED", {"metadata": {"name": "p"}}, 0.0, live=True))
        for _ in range(turns):
            await asyncio.sleep(0)
        if waiting.done():  # delivered before the cancel: nothing to lose
            assert waiting.result() is not None
            return
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
    finally:
        changes.close()
        kube.release.set()
