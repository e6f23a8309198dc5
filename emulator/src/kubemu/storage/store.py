"""The emulator's storage: every object as a dict, a global resourceVersion, and watches.

One :class:`Store` lives in one event loop; its methods are synchronous (nothing in them
awaits), so each call is atomic with respect to the others and to watch registration.
Stored dicts are immutable snapshots: a write stores a new dict, never edits one that was
handed out, so readers may keep what ``get``/``list`` return but must not modify it
(change objects with :meth:`Store.mutate`, :meth:`Store.replace` or :meth:`Store.patch`).
Deletion, owner references and namespaces live in :mod:`kubemu.storage.collector`.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from kubemu.storage import crds, priority
from kubemu.storage.admission import admit_new
from kubemu.storage.collector import Collector
from kubemu.storage.errors import (
    ApiError,
    bad_request,
    conflict,
    not_found,
)
from kubemu.storage.managed import (
    apply_config,
    check_applied,
    record_update,
)
from kubemu.storage.objects import Obj, clone
from kubemu.storage.patch import apply_patch
from kubemu.storage.resources import Registry, ResourceType
from kubemu.storage.selectors import both, field_matcher, label_matcher
from kubemu.storage.updates import prepare_update
from kubemu.storage.watchers import ADDED, DELETED, MODIFIED, Event, EventLog, Watch


class Bucket:
    """The objects of one storage key: namespace ("" when cluster-scoped) → name → object."""

    __slots__ = ("log", "objects", "rt", "watches")

    def __init__(self, rt: ResourceType, log_capacity: int) -> None:
        self.rt = rt
        self.objects: dict[str, dict[str, Obj]] = {}
        self.log = EventLog(log_capacity)
        self.watches: set[Watch] = set()


class Store:
    """Objects of every served type; see the module docstring for the rules of use."""

    def __init__(self, registry: Registry | None = None, log_capacity: int = 200_000) -> None:
        self.registry = registry or Registry()
        self._log_capacity = log_capacity
        self._rv = 0
        self._buckets: dict[str, Bucket] = {}
        for rt in self.registry:
            self.add_bucket(rt)
        self.collector = Collector(self)
        self._listeners: dict[str, list[Callable[[Event], None]]] = {}
        self._admitters: dict[str, list[Callable[[Obj], None]]] = {}
        #: When True (a kubelet runs), deleting a pod bound to a node only marks it with a
        #: deletionTimestamp; the kubelet removes it once its containers stopped.
        self.graceful_pods = False
        #: Inside :meth:`one_version`: the resourceVersion every write there shares.
        self._shared_rv: int | None = None
        crds.follow(self)
        for name in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self.create("namespaces", {"metadata": {"name": name}})
        for pc in priority.system_classes():
            self.create(priority.KEY, pc)

    # -- types -------------------------------------------------------------------------
    def add_bucket(self, rt: ResourceType) -> None:
        if rt.key not in self._buckets:
            self._buckets[rt.key] = Bucket(rt, self._log_capacity)

    def drop_bucket(self, key: str) -> None:
        bucket = self._buckets.pop(key, None)
        if bucket is not None:
            for watch in list(bucket.watches):
                watch.close()

    def bucket(self, key: str) -> Bucket:
        try:
            return self._buckets[key]
        except KeyError:
            raise ApiError(
                404, "NotFound", f"the server could not find the requested resource ({key})"
            ) from None

    def storage_keys(self) -> list[str]:
        return list(self._buckets)

    @property
    def resource_version(self) -> int:
        return self._rv

    # -- reads -------------------------------------------------------------------------
    def try_get(self, key: str, namespace: str | None, name: str) -> Obj | None:
        bucket = self.bucket(key)
        space = (namespace or "") if bucket.rt.namespaced else ""
        return bucket.objects.get(space, {}).get(name)

    def get(self, key: str, namespace: str | None, name: str) -> Obj:
        obj = self.try_get(key, namespace, name)
        if obj is None:
            rt = self.bucket(key).rt
            raise not_found(rt.plural, rt.group, name)
        return obj

    def list(
        self,
        key: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[list[Obj], int]:
        """Matching objects sorted by namespace and name, and the version they were read at."""
        bucket = self.bucket(key)
        match = both(label_matcher(label_selector), field_matcher(field_selector))
        if namespace is not None and bucket.rt.namespaced:
            spaces = [namespace]
        else:
            spaces = sorted(bucket.objects)
        items: list[Obj] = []
        for space in spaces:
            objects = bucket.objects.get(space, {})
            for name in sorted(objects):
                obj = objects[name]
                if match is None or match(obj):
                    items.append(obj)
        return items, self._rv

    def count(self, key: str) -> int:
        return sum(len(objects) for objects in self.bucket(key).objects.values())

    def namespace_is_empty(self, namespace: str) -> bool:
        return not any(
            bucket.objects.get(namespace)
            for bucket in self._buckets.values()
            if bucket.rt.namespaced
        )

    def admit_with(self, key: str, admit: Callable[[Obj], None]) -> None:
        """A mutating admission hook: ``admit`` edits each new object of ``key`` before it is
        stored (after the server's own admission), or raises an ApiError to refuse it."""
        self._admitters.setdefault(key, []).append(admit)

    # -- writes ------------------------------------------------------------------------
    def _next_rv(self) -> int:
        if self._shared_rv is None:
            self._rv += 1
        return self._rv

    @contextmanager
    def one_version(self) -> Iterator[None]:
        """Writes inside share one resourceVersion, as one etcd transaction writing several
        keys does: a watcher that applies every event of a version before looking never
        sees some of them done and others not (the scheduler binds a gang so)."""
        if self._shared_rv is not None:
            yield
            return
        self._rv += 1
        self._shared_rv = self._rv
        try:
            yield
        finally:
            self._shared_rv = None

    def create(
        self,
        key: str,
        obj: Obj,
        namespace: str | None = None,
        managed: builtins.list[Obj] | None = None,
        updater: str | None = None,
    ) -> Obj:
        """Store a new object (defaults filled in, metadata stamped); ADDED to watches.
        ``managed`` is its managedFields (server-side apply's); with ``updater`` (an API
        write's field manager) they record that it set every field."""
        bucket = self.bucket(key)
        rt = bucket.rt
        obj = clone(obj)
        space, name = admit_new(self, rt, obj, namespace)
        if updater and not managed:
            managed = record_update(None, obj, updater, rt.api_version, rt.has_status)
        if managed:
            obj["metadata"]["managedFields"] = managed
        for admit in self._admitters.get(key, ()):
            admit(obj)
        meta = obj["metadata"]
        meta["resourceVersion"] = str(self._next_rv())
        bucket.objects.setdefault(space, {})[name] = obj
        self.collector.indexed(key, None, obj)
        self._emit(bucket, Event(ADDED, obj, self._rv))
        if key == "namespaces":
            # The service-account controller's work: every namespace has a "default" account.
            self.create("serviceaccounts", {"metadata": {"name": "default"}}, name)
        return self.collector.created(key, obj)

    def replace(
        self,
        key: str,
        namespace: str | None,
        name: str,
        obj: Obj,
        subresource: str | None = None,
        managed: builtins.list[Obj] | None = None,
        updater: str | None = None,
    ) -> Obj:
        """PUT: the whole object (or only its status with ``subresource="status"``).

        A ``metadata.resourceVersion`` in ``obj`` that is not the stored one is a 409
        Conflict; without one the update is unconditional, as the real server allows.
        The stored managedFields are kept, replaced by ``managed`` (server-side apply), or
        changed to record what ``updater`` (an API write's field manager) changed.
        """
        rt = self.bucket(key).rt
        current = self.get(key, namespace, name)
        new = prepare_update(rt, current, obj, name, subresource, managed, updater)
        return self.commit(key, current, new)

    def commit(self, key: str, current: Obj, new: Obj) -> Obj:
        """Store ``new`` in place of ``current`` (no checks: the collector's and ours)."""
        bucket = self.bucket(key)
        meta = new["metadata"]
        meta["resourceVersion"] = current["metadata"]["resourceVersion"]
        if new == current:
            return current  # a no-op write keeps its version, as the real server's does
        if "generation" in meta and _spec(new) != _spec(current):
            meta["generation"] = int(meta["generation"]) + 1
        if current["metadata"].get("deletionTimestamp") and not meta.get("deletionTimestamp"):
            meta["deletionTimestamp"] = current["metadata"]["deletionTimestamp"]
        meta["resourceVersion"] = str(self._next_rv())
        space = meta.get("namespace", "")
        bucket.objects[space][meta["name"]] = new
        self.collector.indexed(bucket.rt.key, current, new)
        self._emit(bucket, Event(MODIFIED, new, self._rv, current))
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self.collector.finalized(bucket.rt.key, new)
        return new

    def patch(
        self,
        key: str,
        namespace: str | None,
        name: str,
        content_type: str,
        body: Any,
        subresource: str | None = None,
        updater: str | None = None,
    ) -> Obj:
        """PATCH with a merge, strategic merge or JSON patch body."""
        current = self.get(key, namespace, name)
        patched = apply_patch(content_type, current, body)
        # a resourceVersion the patch states is checked by the update, as a PUT's is
        return self.replace(key, namespace, name, patched, subresource, updater=updater)

    def apply(
        self, key: str, namespace: str | None, name: str, body: Any, manager: str, force: bool
    ) -> tuple[Obj, bool]:
        """Server-side apply of ``body`` by ``manager`` (:mod:`.managed`); creates the object
        when absent. The object, and whether it was created."""
        rt = self.bucket(key).rt
        check_applied(body, name)
        current = self.try_get(key, namespace, name)
        new = apply_config(current, body, manager, force, rt.api_version, rt.has_status)
        managed = new["metadata"].get("managedFields")
        if current is None:
            new["metadata"]["name"] = name
            return self.create(key, new, namespace, managed), True
        if new is current:
            return current, False
        return self.replace(key, namespace, name, new, managed=managed), False

    def mutate(
        self,
        key: str,
        namespace: str | None,
        name: str,
        change: Callable[[Obj], Obj | None],
        subresource: str | None = None,
    ) -> Obj:
        """Apply ``change`` to a private copy of the object and store the result.

        ``change`` edits the copy in place (or returns a replacement). Controllers use it
        with ``subresource="status"`` to write status, as a kubelet's PUT /status would.
        """
        current = self.get(key, namespace, name)
        draft = clone(current)
        result = change(draft)
        return self.replace(key, namespace, name, draft if result is None else result, subresource)

    def delete(
        self,
        key: str,
        namespace: str | None,
        name: str,
        propagation: str | None = None,
        grace_period_s: int | None = None,
        preconditions: dict[str, str] | None = None,
    ) -> Obj:
        """DELETE; returns the object as last stored (marked, or gone)."""
        obj = self.get(key, namespace, name)
        for field, value in (preconditions or {}).items():
            if value and obj["metadata"].get(field) != value:
                rt = self.bucket(key).rt
                raise conflict(rt.plural, rt.group, name)
        return self.collector.delete(key, obj, propagation, grace_period_s)

    def remove(self, key: str, obj: Obj) -> Obj:
        """Take ``obj`` out of storage now (the collector's last step); DELETED to watches."""
        bucket = self.bucket(key)
        meta = obj["metadata"]
        objects = bucket.objects.get(meta.get("namespace", ""), {})
        if objects.get(meta["name"]) is not obj:
            return obj
        del objects[meta["name"]]
        self._next_rv()
        gone = dict(obj, metadata=dict(meta, resourceVersion=str(self._rv)))
        self.collector.indexed(key, obj, None)
        self._emit(bucket, Event(DELETED, gone, self._rv))
        return gone

    # -- watches -----------------------------------------------------------------------
    def watch(
        self,
        key: str,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> Watch:
        """Subscribe to changes of one type.

        Without ``resource_version`` (or with "0") the watch first receives an ADDED event
        for every object that matches, then every later change; with a version it receives
        the changes after it, or 410 Gone (:class:`ApiError`) when those were compacted.
        """
        bucket = self.bucket(key)
        watch = Watch(
            namespace if bucket.rt.namespaced else None,
            both(label_matcher(label_selector), field_matcher(field_selector)),
            bucket.watches.discard,
        )
        if resource_version in (None, "", "0"):
            items, _ = self.list(key, namespace, label_selector, field_selector)
            for obj in items:
                watch.push(Event(ADDED, obj, int(obj["metadata"]["resourceVersion"])))
        else:
            try:
                since = int(resource_version)
            except ValueError:
                raise bad_request(f"invalid resource version {resource_version!r}") from None
            events = bucket.log.since(since)
            if events is None:
                raise ApiError(
                    410, "Expired", f"too old resource version: {since} ({bucket.log.floor})"
                )
            for event in events:
                watch.offer(event)
        bucket.watches.add(watch)
        return watch

    def close_watches(self) -> None:
        """End every watch (the server is stopping)."""
        for bucket in self._buckets.values():
            for watch in list(bucket.watches):
                watch.close()

    def subscribe(self, key: str, callback: Callable[[Event], None]) -> None:
        """Call ``callback(event)`` synchronously after every write to ``key``.

        For in-process controllers that must see each change before the writer returns
        (an index, a registry); a callback must not raise and should not write to the
        store (it would nest writes). Most controllers use :meth:`watch` instead.
        """
        self._listeners.setdefault(key, []).append(callback)

    def _emit(self, bucket: Bucket, event: Event) -> None:
        bucket.log.append(event)
        for watch in bucket.watches:
            watch.offer(event)
        for callback in self._listeners.get(bucket.rt.key, ()):
            callback(event)


def _spec(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}
