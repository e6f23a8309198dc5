"""How one stored object is shown through a given API version.

``events.k8s.io/v1`` Event and ``core/v1`` Event are one storage (kubectl describe reads
core events that a controller wrote through events.k8s.io, as in a real cluster); a CRD
served in several versions shows its objects with the requested ``apiVersion`` (no schema
conversion). Every other type is shown as stored, without copying.
"""

from __future__ import annotations

from typing import Any

from kubemu.storage.resources import ResourceType

Obj = dict[str, Any]

#: events.k8s.io/v1 field → core/v1 field.
_EVENT_FIELDS = {
    "regarding": "involvedObject",
    "note": "message",
    "reportingController": "reportingComponent",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
_SHARED = (
    "metadata",
    "reason",
    "type",
    "eventTime",
    "series",
    "action",
    "related",
    "reportingInstance",
)


def is_identity(rt: ResourceType, stored_api_version: str) -> bool:
    return rt.group != "events.k8s.io" and rt.api_version == stored_api_version


def to_view(rt: ResourceType, obj: Obj) -> Obj:
    """``obj`` (stored form) as ``rt`` shows it."""
    if rt.group == "events.k8s.io":
        out: Obj = {"kind": "Event", "apiVersion": rt.api_version}
        for name in _SHARED:
            if obj.get(name) is not None:
                out[name] = obj[name]
        for new, old in _EVENT_FIELDS.items():
            if obj.get(old) is not None:
                out[new] = obj[old]
        return out
    if obj.get("apiVersion") != rt.api_version:
        return {**obj, "apiVersion": rt.api_version}
    return obj


def from_view(rt: ResourceType, obj: Obj, stored_api_version: str) -> Obj:
    """A body sent through ``rt`` in stored form."""
    if rt.group == "events.k8s.io":
        out: Obj = {"kind": "Event", "apiVersion": "v1"}
        for name in _SHARED:
            if obj.get(name) is not None:
                out[name] = obj[name]
        for new, old in _EVENT_FIELDS.items():
            if obj.get(new) is not None:
                out[old] = obj[new]
        return out
    if obj.get("apiVersion") != stored_api_version:
        return {**obj, "apiVersion": stored_api_version}
    return obj


def selector_in_storage(rt: ResourceType, selector: str | None) -> str | None:
    """A field selector written against ``rt``'s field names, in stored names."""
    if not selector or rt.group != "events.k8s.io":
        return selector
    for new, old in _EVENT_FIELDS.items():
        selector = selector.replace(f"{new}.", f"{old}.").replace(f"{new}=", f"{old}=")
    return selector
