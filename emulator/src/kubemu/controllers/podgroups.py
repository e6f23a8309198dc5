"""The PodGroup controller of scheduler-plugins: keeps each PodGroup's status.

Its phases and counts are :func:`~kubemu.machinery.podgroups.status_for`'s;
``occupiedBy`` is set to the controller owner's uid of the first member pod that has one
(a Job's, say), as the real controller records which workload took the group.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kubemu.machinery import podgroups
from kubemu.machinery.loop import ControllerLoop, Key, itself

if TYPE_CHECKING:
    from kubemu.storage.store import Store


def _group(pod: Mapping[str, Any]) -> list[Key]:
    key = podgroups.group_of(pod)
    return [key] if key else []


class PodGroupController:
    def __init__(self, store: Store) -> None:
        self.store = store
        podgroups.install(store)
        self.loop = ControllerLoop(
            store, "podgroup", {podgroups.KEY: itself, "pods": _group}, self.reconcile
        )

    async def run(self) -> None:
        await self.loop.run()

    def reconcile(self, namespace: str, name: str) -> float | None:
        group = self.store.try_get(podgroups.KEY, namespace, name)
        if group is None or group["metadata"].get("deletionTimestamp"):
            return None
        pods, _ = self.store.list("pods", namespace, f"{podgroups.LABEL}={name}")
        pods = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        status = podgroups.status_for(group, pods)
        if "occupiedBy" not in status:
            owners = [
                ref["uid"]
                for p in pods
                for ref in p["metadata"].get("ownerReferences") or []
                if ref.get("controller")
            ]
            if owners:
                status["occupiedBy"] = owners[0]
        if status != (group.get("status") or {}):

            def write(draft: dict[str, Any]) -> None:
                draft["status"] = status

            self.store.mutate(podgroups.KEY, namespace, name, write, subresource="status")
        return None
