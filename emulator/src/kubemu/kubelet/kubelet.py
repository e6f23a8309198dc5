"""The process-kubelet: runs the pods the scheduler bound, writes their status, ends them.

It watches pods. A pod bound to a node (``spec.nodeName``) gets a :class:`PodRuntime`; its
status changes are coalesced and written once per event-loop turn through the status
subresource, so a burst of container transitions costs one write. Deleting a pod marks it
(``Store.graceful_pods``); the kubelet stops its containers (SIGTERM, the grace period,
SIGKILL of the process group) and then removes it with grace period 0. On shutdown every
container process is killed at once; the kernel kills them anyway should the emulator die
(``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kubemu.kubelet.pod import Host, PodRuntime
from kubemu.kubelet.services import service_env
from kubemu.machinery import events
from kubemu.storage.errors import ApiError
from kubemu.storage.watchers import DELETED

if TYPE_CHECKING:
    from kubemu.storage.store import Store

_log = logging.getLogger(__name__)
_LOOKUP_KEYS = {
    "Secret": "secrets",
    "ConfigMap": "configmaps",
    "PersistentVolumeClaim": "persistentvolumeclaims",
}
Key = tuple[str, str]


class Kubelet:
    """Every emulated node's kubelet (one process serves them all)."""

    def __init__(self, store: Store, host: Host) -> None:
        self.store = store
        self.host = replace(host, services=self.service_env)
        self.pods: dict[Key, PodRuntime] = {}
        self._tasks: dict[Key, asyncio.Task[None]] = {}
        self._terminating: set[Key] = set()
        self._dirty: dict[Key, PodRuntime] = {}
        self._flush_scheduled = False
        self._group: asyncio.TaskGroup | None = None

    @staticmethod
    def lookup_in(store: Store, kinds: Mapping[str, str] | None = None) -> Any:
        """A ``Lookup`` over ``store`` for Secrets, ConfigMaps and claims, and ``kinds``
        (kind → store key) a volume driver reads (Datashim's Datasets)."""
        keys = {**_LOOKUP_KEYS, **(kinds or {})}

        def lookup(kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
            try:
                return store.try_get(keys[kind], namespace, name)
            except (ApiError, KeyError):
                return None

        return lookup

    def runtime(self, namespace: str, name: str) -> PodRuntime | None:
        return self.pods.get((namespace, name))

    def service_env(self, pod: Mapping[str, Any]) -> dict[str, str]:
        """The Service variables of ``pod``'s namespace, pointing at this host's ports."""
        if (pod.get("spec") or {}).get("enableServiceLinks") is False:
            return {}
        namespace = str(pod["metadata"].get("namespace") or "default")
        services, _ = self.store.list("services", namespace)
        pods, _ = self.store.list("pods", namespace)

        def host_ports(ns: str, name: str) -> Mapping[int, int]:
            runtime = self.pods.get((ns, name))
            return runtime.ports if runtime is not None else {}

        return service_env(services, pods, host_ports)

    async def run(self) -> None:
        """Serve until cancelled; then kill every container."""
        self.store.graceful_pods = True
        watch = self.store.watch("pods")
        try:
            async with asyncio.TaskGroup() as group:
                self._group = group
                async for event in watch:
                    self._on_event(event.type, event.object)
        finally:
            watch.close()
            self.store.graceful_pods = False
            self.kill_all()

    async def stop_all(self, grace_s: float) -> None:
        """Stop every pod's containers (SIGTERM, up to ``grace_s``, then SIGKILL)."""
        runtimes = list(self.pods.values())
        await asyncio.gather(*(rt.stop(grace_s) for rt in runtimes))
        for task in list(self._tasks.values()):
            task.cancel()
        for runtime in runtimes:
            runtime.kill_now()

    def kill_all(self) -> None:
        """SIGKILL every container process now (shutdown)."""
        for runtime in self.pods.values():
            runtime.kill_now()

    def _on_event(self, kind: str, pod: Mapping[str, Any]) -> None:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        key = (str(meta.get("namespace")), str(meta["name"]))
        runtime = self.pods.get(key)
        if runtime is not None and runtime.pod["metadata"]["uid"] != meta["uid"]:
            runtime = None  # an older pod of the same name
        if kind == DELETED:
            if runtime is not None and key not in self._terminating:
                self._spawn(self._terminate(key, runtime, pod, remove=False), key)
            self.host.logbook.forget(*key)
            return
        if not spec.get("nodeName"):
            return
        if meta.get("deletionTimestamp"):
            if key not in self._terminating:
                self._terminating.add(key)
                self._spawn(self._terminate(key, runtime, pod, remove=True), key)
            return
        phase = (pod.get("status") or {}).get("phase")
        if runtime is None and key not in self._tasks and phase not in ("Succeeded", "Failed"):
            runtime = PodRuntime(pod, self.host, self._emitter(key), self._mark_dirty)
            self.pods[key] = runtime
            self._tasks[key] = self._spawn(self._guard(runtime), key)

    def _spawn(self, coro: Any, key: Key) -> asyncio.Task[None]:
        assert self._group is not None
        return self._group.create_task(coro, name=f"kubelet-{key[0]}/{key[1]}")

    async def _guard(self, runtime: PodRuntime) -> None:
        try:
            await runtime.run()
        except Exception as exc:  # one pod's failure must not stop the kubelet
            _log.exception("pod %s/%s failed in the kubelet", *runtime.key)
            runtime.emit("Warning", "Failed", f"kubelet error: {exc}", "")

    async def _terminate(
        self, key: Key, runtime: PodRuntime | None, pod: Mapping[str, Any], remove: bool
    ) -> None:
        meta = pod["metadata"]
        grace = meta.get("deletionGracePeriodSeconds")
        if grace is None:
            grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
        try:
            if runtime is not None:
                await runtime.stop(float(grace))
                task = self._tasks.get(key)
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
                runtime.kill_now()  # anything started while it was being stopped
            if remove:
                with contextlib.suppress(ApiError):
                    current = self.store.try_get("pods", key[0], key[1])
                    if current is not None and current["metadata"]["uid"] == meta["uid"]:
                        self.store.delete("pods", key[0], key[1], grace_period_s=0)
        finally:
            self._terminating.discard(key)
            if self.pods.get(key) is runtime:
                self.pods.pop(key, None)
                self._tasks.pop(key, None)

    def _emitter(self, key: Key) -> Any:
        def emit(type_: str, reason: str, note: str, field_path: str) -> None:
            runtime = self.pods.get(key)
            pod = runtime.pod if runtime is not None else None
            if pod is None:
                return
            node = str((pod.get("spec") or {}).get("nodeName") or "")
            events.record(self.store, pod, type_, reason, note, "kubelet", node, field_path)

        return emit

    def _mark_dirty(self, runtime: PodRuntime) -> None:
        self._dirty[runtime.key] = runtime
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        dirty, self._dirty = self._dirty, {}
        for key, runtime in dirty.items():
            uid = runtime.pod["metadata"]["uid"]

            def change(
                draft: dict[str, Any], runtime: PodRuntime = runtime, uid: str = uid
            ) -> None:
                if draft["metadata"]["uid"] != uid:
                    raise ApiError(409, "Conflict", "the pod was replaced")
                draft["status"] = runtime.status(draft.get("status") or {})

            with contextlib.suppress(ApiError):
                self.store.mutate("pods", key[0], key[1], change, subresource="status")
