"""Admission of new objects: namespace, name, metadata the server owns, defaults, validation.

What the real API server does to a create request before storing it: the namespace must
exist and not be terminating, a ``generateName`` gets its random suffix, names, labels and
annotations are validated, server-owned metadata is replaced, status is reset (except a
node's), and the kind's defaults and checks are applied (:mod:`defaults`); a pod's
priority comes from its PriorityClass (:mod:`priority`).
"""

from __future__ import annotations

from kubemu.storage import meta as _meta
from kubemu.storage import priority
from kubemu.storage.defaults import prepare_create
from kubemu.storage.errors import (
    already_exists,
    bad_request,
    forbidden,
    invalid,
    not_found,
)
from kubemu.storage.objects import Obj, Reader
from kubemu.storage.resources import ResourceType

#: Kinds whose status a create keeps (the real server keeps node status and resets others').
_STATUS_ON_CREATE = frozenset({"nodes"})
_SERVER_OWNED = (
    "uid",
    "creationTimestamp",
    "resourceVersion",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "managedFields",
    "selfLink",
)


def admit_new(store: Reader, rt: ResourceType, obj: Obj, namespace: str | None) -> tuple[str, str]:
    """Prepare ``obj`` (a private copy) in place; its namespace ("" if cluster-scoped) and name."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = obj["metadata"] = {}
    obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
    space = _namespace(store, rt, meta, namespace)

    def taken(name: str) -> bool:
        return store.try_get(rt.key, space, name) is not None

    name = meta.get("name") or ""
    if not name and meta.get("generateName"):
        name = _meta.generated_name(meta["generateName"])
        while taken(name):
            name = _meta.generated_name(meta["generateName"])
    if not name:
        required = [("metadata.name", "Required value: name or generateName is required")]
        raise invalid(rt.kind, rt.group, "", required)
    errors = _meta.name_errors(rt.kind, name) + _meta.metadata_errors(meta)
    if errors:
        raise invalid(rt.kind, rt.group, name, errors)
    if taken(name):
        raise already_exists(rt.plural, rt.group, name)
    for field in _SERVER_OWNED:
        meta.pop(field, None)
    meta.update(name=name, uid=_meta.new_uid(), creationTimestamp=_meta.now())
    if rt.namespaced:
        meta["namespace"] = space
    if rt.has_status and rt.key not in _STATUS_ON_CREATE:
        obj.pop("status", None)
        meta["generation"] = 1
    errors = prepare_create(rt.key, obj)
    if errors:
        raise invalid(rt.kind, rt.group, name, errors)
    if rt.key == "pods":
        priority.admit_pod(store, obj)
    elif rt.key == priority.KEY:
        priority.admit_class(store, obj)
    return space, name


def _namespace(store: Reader, rt: ResourceType, meta: Obj, namespace: str | None) -> str:
    if not rt.namespaced:
        meta.pop("namespace", None)
        return ""
    space = namespace or meta.get("namespace") or "default"
    if meta.get("namespace") and meta["namespace"] != space:
        raise bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    ns = store.try_get("namespaces", None, space)
    if ns is None:
        raise not_found("namespaces", "", space)
    if ns["metadata"].get("deletionTimestamp"):
        raise forbidden(
            rt.plural,
            rt.group,
            meta.get("name") or "",
            f"unable to create new content in namespace {space} because it is being terminated",
        )
    return space
