"""Events the controllers, the scheduler and the kubelet record about objects.

Stored in the core ``events`` storage (the API serves it as ``v1`` and ``events.k8s.io/v1``),
with both the core fields kubectl reads (``involvedObject``, ``message``, ``source``,
``firstTimestamp``/``lastTimestamp``, ``count``) and the events.k8s.io ones
(``eventTime`` with microseconds, ``reportingController``/``reportingInstance``, ``action``).
``eventTime`` is taken when the event happens: the scale probe measures stages with it.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kubemu.storage.meta import now, now_micro

if TYPE_CHECKING:
    from kubemu.storage.store import Store

_serial = itertools.count()


def record(
    store: Store,
    obj: Mapping[str, Any],
    type_: str,
    reason: str,
    note: str,
    component: str,
    host: str = "",
    field_path: str = "",
) -> None:
    """Create one event about ``obj`` (a pod, a job …); a vanished namespace is ignored."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    involved: dict[str, Any] = {
        "apiVersion": obj.get("apiVersion", "v1"),
        "kind": obj.get("kind", "Pod"),
        "name": meta.get("name"),
        "namespace": namespace,
        "uid": meta.get("uid"),
        "resourceVersion": meta.get("resourceVersion"),
    }
    if field_path:
        involved["fieldPath"] = field_path
    stamp = now()
    event = {
        "metadata": {
            "name": f"{meta.get('name')}.{time.time_ns():x}{next(_serial) % 1000:03d}",
            "namespace": namespace,
        },
        "involvedObject": involved,
        "reason": reason,
        "message": note,
        "type": type_,
        "source": {"component": component, **({"host": host} if host else {})},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "eventTime": now_micro(),
        "action": reason,
        "reportingComponent": component,
        "reportingInstance": host or component,
    }
    from kubemu.storage.errors import ApiError

    try:
        store.create("events", event, namespace)
    except ApiError:
        return  # the namespace is going away; nobody can read the event anyway
