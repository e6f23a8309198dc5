"""The loop every workload controller shares: watch, map changes to owners, reconcile each once.

A controller names the kinds it watches and, for each, which of its own objects a change
concerns (the object itself, or the controller owner of a pod or ReplicaSet). Keys pile up
in a set while the loop works, so a storm of pod events reconciles each owner once per
turn. ``reconcile`` is synchronous (the store is), may ask to be called again after some
seconds (a deadline to check), and an API error only means "retry at the next change".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kubemu.storage.errors import ApiError

if TYPE_CHECKING:
    from kubemu.storage.store import Store

_log = logging.getLogger(__name__)
Key = tuple[str, str]
Mapper = Callable[[Mapping[str, Any]], list[Key]]
#: reconcile(namespace, name) → seconds until it wants to run again, or None.
Reconcile = Callable[[str, str], float | None]
_BATCH = 100


def itself(obj: Mapping[str, Any]) -> list[Key]:
    meta = obj["metadata"]
    return [(str(meta.get("namespace")), str(meta["name"]))]


def owner_of(kind: str) -> Mapper:
    """Map an object to its controller owner of ``kind`` (a pod → its ReplicaSet)."""

    def mapper(obj: Mapping[str, Any]) -> list[Key]:
        meta = obj["metadata"]
        return [
            (str(meta.get("namespace")), str(ref["name"]))
            for ref in meta.get("ownerReferences") or []
            if ref.get("controller") and ref.get("kind") == kind
        ]

    return mapper


def owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    refs = obj["metadata"].get("ownerReferences") or []
    return any(ref.get("uid") == uid and ref.get("controller") for ref in refs)


class ControllerLoop:
    """Runs ``reconcile`` for every key a watched change maps to."""

    def __init__(
        self, store: Store, name: str, watched: Mapping[str, Mapper], reconcile: Reconcile
    ) -> None:
        self.store = store
        self.name = name
        self.watched = watched
        self.reconcile = reconcile
        self._pending: dict[Key, None] = {}
        self._wake = asyncio.Event()

    def enqueue(self, key: Key) -> None:
        self._pending[key] = None
        self._wake.set()

    async def run(self) -> None:
        watches = [self.store.watch(key) for key in self.watched]
        try:
            async with asyncio.TaskGroup() as group:
                for watch, mapper in zip(watches, self.watched.values(), strict=True):
                    group.create_task(self._follow(watch, mapper))
                group.create_task(self._work())
        finally:
            for watch in watches:
                watch.close()

    async def _follow(self, watch: Any, mapper: Mapper) -> None:
        async for event in watch:
            for key in mapper(event.object):
                self._pending[key] = None
            self._wake.set()

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._wake.wait()
            self._wake.clear()
            done = 0
            while self._pending:
                key = next(iter(self._pending))
                del self._pending[key]
                again = self._reconcile_one(key)
                if again is not None:
                    loop.call_later(max(again, 0.0), self.enqueue, key)
                done += 1
                if done % _BATCH == 0:
                    await asyncio.sleep(0)

    def _reconcile_one(self, key: Key) -> float | None:
        try:
            return self.reconcile(*key)
        except ApiError as exc:
            _log.debug("%s: %s/%s: %s (retried at the next change)", self.name, *key, exc)
            with contextlib.suppress(RuntimeError):
                asyncio.get_running_loop().call_later(0.5, self.enqueue, key)
            return None
