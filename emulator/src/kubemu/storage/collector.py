"""Deletion: finalizers, graceful pods, owner-reference garbage collection and namespaces.

What the real API server and its garbage collector and namespace controller do, done
synchronously at the moment of the write that makes it due:

- an object with finalizers (or deleted with ``Foreground``/``Orphan`` propagation while it
  has dependents) is only marked with a ``deletionTimestamp``; it goes when its last
  finalizer is removed;
- ``Background`` (the default): the owner goes at once, then each dependent none of whose
  other owners remains; ``Foreground``: dependents go first (recursively), then the owner;
  ``Orphan``: dependents lose their owner reference and stay;
- a pod bound to a node, while a kubelet runs (``Store.graceful_pods``), is only marked; the
  kubelet deletes it with grace period 0 once its containers stopped (or the grace period
  runs out here);
- a namespace turns ``Terminating``, everything in it is deleted, and it goes when empty.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

from kubemu.storage import meta as _meta
from kubemu.storage.errors import forbidden
from kubemu.storage.objects import Obj, clone
from kubemu.storage.resources import ResourceType

Ref = tuple[str, str, str]  # store key, namespace, name
_PROTECTED_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})
FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"


def _owner_uids(obj: Obj | None) -> set[str]:
    if obj is None:
        return set()
    return {ref["uid"] for ref in obj["metadata"].get("ownerReferences") or [] if ref.get("uid")}


class _Bucket(Protocol):
    @property
    def rt(self) -> ResourceType: ...


class Kept(Protocol):
    """What the collector does to the store that owns it (:class:`.store.Store`)."""

    graceful_pods: bool

    def try_get(self, key: str, namespace: str | None, name: str) -> Obj | None: ...

    def bucket(self, key: str) -> _Bucket: ...

    def storage_keys(self) -> list[str]: ...

    def namespace_is_empty(self, namespace: str) -> bool: ...

    def commit(self, key: str, current: Obj, new: Obj) -> Obj: ...

    def remove(self, key: str, obj: Obj) -> Obj: ...

    # Last: below it, ``list`` would name this method.
    def list(self, key: str, namespace: str | None = None) -> tuple[Sequence[Obj], int]: ...


class Collector:
    """Owner index and deletion rules of one :class:`.store.Store`."""

    def __init__(self, store: Kept) -> None:
        self._store = store
        self._where: dict[str, Ref] = {}
        self._dependents: dict[str, set[Ref]] = {}

    # -- index, kept by the store on every write ---------------------------------------
    def indexed(self, key: str, old: Obj | None, new: Obj | None) -> None:
        obj = new if new is not None else old
        assert obj is not None
        meta = obj["metadata"]
        ref = (key, meta.get("namespace", ""), meta["name"])
        if new is None:
            self._where.pop(meta["uid"], None)
        else:
            self._where[meta["uid"]] = ref
        before, after = _owner_uids(old), _owner_uids(new)
        for uid in before - after:
            self._dependents.get(uid, set()).discard(ref)
        for uid in after - before:
            self._dependents.setdefault(uid, set()).add(ref)

    def by_uid(self, uid: str) -> tuple[str, Obj] | None:
        ref = self._where.get(uid)
        if ref is None:
            return None
        obj = self._store.try_get(*ref)
        return None if obj is None else (ref[0], obj)

    def dependents(self, uid: str) -> list[tuple[str, Obj]]:
        out = []
        for key, space, name in list(self._dependents.get(uid, ())):
            obj = self._store.try_get(key, space, name)
            if obj is not None:
                out.append((key, obj))
        return out

    def created(self, key: str, obj: Obj) -> Obj:
        """A new object whose owners are all gone is collected at once, as the GC would."""
        owners = _owner_uids(obj)
        if owners and not any(uid in self._where for uid in owners):
            self.delete(key, obj, "Background", None)
        return obj

    # -- deletion ----------------------------------------------------------------------
    def delete(self, key: str, obj: Obj, propagation: str | None, grace_s: int | None) -> Obj:
        meta = obj["metadata"]
        if key == "namespaces":
            return self._terminate_namespace(obj)
        if meta.get("deletionTimestamp"):
            if key == "pods" and grace_s == 0 and not meta.get("finalizers"):
                return self._remove(key, obj)
            return obj
        finalizers = list(meta.get("finalizers") or [])
        has_dependents = bool(self.dependents(meta["uid"]))
        if propagation == "Orphan" and has_dependents:
            finalizers.append(ORPHAN)
        elif propagation == "Foreground" and has_dependents:
            finalizers.append(FOREGROUND)
        graceful = key == "pods" and grace_s != 0 and self._kubelet_must_stop(obj)
        if not finalizers and not graceful:
            return self._remove(key, obj)
        new = clone(obj)
        new["metadata"]["deletionTimestamp"] = _meta.now()
        new["metadata"]["finalizers"] = finalizers
        if not finalizers:
            del new["metadata"]["finalizers"]
        if graceful:
            grace = (
                grace_s
                if grace_s is not None
                else obj["spec"].get("terminationGracePeriodSeconds", 30)
            )
            new["metadata"]["deletionGracePeriodSeconds"] = grace
            self._force_later(key, meta, grace)
        marked = self._store.commit(key, obj, new)
        if ORPHAN in finalizers:
            self._orphan(meta["uid"])
            marked = self._drop_finalizer(key, marked, ORPHAN)
        elif FOREGROUND in finalizers:
            for dep_key, dep in self.dependents(meta["uid"]):
                self.delete(dep_key, dep, "Foreground", None)
            self._release_foreground(meta["uid"])
        current = self._store.try_get(key, meta.get("namespace"), meta["name"])
        return current if current is not None else marked

    def finalized(self, key: str, obj: Obj) -> None:
        """Called when an update leaves a deleted object without finalizers."""
        if key == "namespaces" and not self._store.namespace_is_empty(obj["metadata"]["name"]):
            return  # the namespace goes with its last object (spec.finalizers "kubernetes")
        if (
            key == "pods"
            and obj["metadata"].get("deletionGracePeriodSeconds")
            and self._kubelet_must_stop(obj)
        ):
            return  # the kubelet removes it once its containers stopped
        self._remove(key, obj)

    def _kubelet_must_stop(self, pod: Obj) -> bool:
        return (
            self._store.graceful_pods
            and bool((pod.get("spec") or {}).get("nodeName"))
            and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        )

    def _force_later(self, key: str, meta: Obj, grace_s: int) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        uid = meta["uid"]

        def force() -> None:
            found = self.by_uid(uid)
            if found is not None and not found[1]["metadata"].get("finalizers"):
                self._remove(key, found[1])

        loop.call_later(max(grace_s, 0) + 1.0, force)

    def _remove(self, key: str, obj: Obj) -> Obj:
        gone = self._store.remove(key, obj)
        self._after_removed(key, obj)
        return gone

    def _after_removed(self, key: str, obj: Obj) -> None:
        meta = obj["metadata"]
        uid = meta["uid"]
        for dep_key, dep in self.dependents(uid):
            if dep["metadata"].get("deletionTimestamp"):
                continue
            if any(other in self._where for other in _owner_uids(dep) - {uid}):
                continue  # another owner remains
            self.delete(dep_key, dep, "Background", None)
        self._dependents.pop(uid, None)
        for owner_uid in _owner_uids(obj):
            self._release_foreground(owner_uid)
        space = meta.get("namespace")
        if space:
            ns = self._store.try_get("namespaces", None, space)
            terminating = ns is not None and ns["metadata"].get("deletionTimestamp")
            if terminating and ns is not None and self._store.namespace_is_empty(space):
                self._store.remove("namespaces", ns)

    def _release_foreground(self, owner_uid: str) -> None:
        found = self.by_uid(owner_uid)
        if found is None:
            return
        key, owner = found
        if FOREGROUND in (owner["metadata"].get("finalizers") or []) and not self.dependents(
            owner_uid
        ):
            self._drop_finalizer(key, owner, FOREGROUND)

    def _drop_finalizer(self, key: str, obj: Obj, finalizer: str) -> Obj:
        new = clone(obj)
        new["metadata"]["finalizers"] = [
            f for f in obj["metadata"].get("finalizers") or [] if f != finalizer
        ]
        return self._store.commit(key, obj, new)

    def _orphan(self, owner_uid: str) -> None:
        for dep_key, dep in self.dependents(owner_uid):
            new = clone(dep)
            refs = [
                r for r in dep["metadata"].get("ownerReferences") or [] if r.get("uid") != owner_uid
            ]
            new["metadata"]["ownerReferences"] = refs
            if not refs:
                del new["metadata"]["ownerReferences"]
            self._store.commit(dep_key, dep, new)

    def _terminate_namespace(self, ns: Obj) -> Obj:
        name = ns["metadata"]["name"]
        if name in _PROTECTED_NAMESPACES:
            raise forbidden(
                "namespaces",
                "",
                name,
                f'namespaces "{name}" is forbidden: this namespace may not be deleted',
            )
        if not ns["metadata"].get("deletionTimestamp"):
            new = clone(ns)
            new["metadata"]["deletionTimestamp"] = _meta.now()
            new["status"] = {"phase": "Terminating"}
            ns = self._store.commit("namespaces", ns, new)
        for key in self._store.storage_keys():
            if not self._store.bucket(key).rt.namespaced:
                continue
            items, _ = self._store.list(key, name)
            for obj in items:
                current = self._store.try_get(key, name, obj["metadata"]["name"])
                if current is not None and not current["metadata"].get("deletionTimestamp"):
                    self.delete(key, current, "Background", None)
        if self._store.namespace_is_empty(name):
            return self._store.remove("namespaces", ns)
        return ns
