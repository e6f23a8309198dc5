"""What an update (PUT) may change, as the API server's update strategy decides before storing.

The name on the URL wins; a stated ``metadata.resourceVersion`` that is not the stored one
is a 409 Conflict; a ``status`` subresource write changes only the status, a main-resource
write never does (for kinds with a status); the metadata the server owns (uid, creation and
deletion stamps, generation, namespace) is kept from the stored object; managedFields are
kept, replaced (server-side apply) or updated for the writer's field manager; then the
metadata and the kind's update rules (:mod:`.defaults`) are validated (422).
"""

from __future__ import annotations

from kubemu.storage import meta as _meta
from kubemu.storage.defaults import validate_update
from kubemu.storage.errors import bad_request, conflict, invalid
from kubemu.storage.managed import owners_after_update
from kubemu.storage.objects import Obj, clone
from kubemu.storage.resources import ResourceType


def prepare_update(
    rt: ResourceType,
    current: Obj,
    obj: Obj,
    name: str,
    subresource: str | None = None,
    managed: list[Obj] | None = None,
    updater: str | None = None,
) -> Obj:
    """The object to store in place of ``current`` for a PUT of ``obj`` (a private copy)."""
    obj = clone(obj)
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = obj["metadata"] = {}
    if meta.get("name", name) != name:
        raise bad_request(
            f"the name of the object ({meta.get('name')}) does not match the name on the URL"
            f" ({name})"
        )
    wanted_rv = meta.get("resourceVersion")
    if wanted_rv and wanted_rv != current["metadata"]["resourceVersion"]:
        raise conflict(rt.plural, rt.group, name)
    if subresource == "status":
        new = clone(current)
        new["status"] = obj.get("status")
    else:
        new = obj
        if rt.has_status:
            new["status"] = clone(current.get("status"))
        if new.get("status") is None:
            new.pop("status", None)
        keep = current["metadata"]
        for field in (
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "namespace",
        ):
            if field in keep:
                meta[field] = keep[field]
            else:
                meta.pop(field, None)
        meta["name"] = name
        meta.pop("managedFields", None)
        owners = owners_after_update(rt, current, new, managed, updater)
        if owners:
            meta["managedFields"] = owners
        errors = _meta.metadata_errors(meta) + validate_update(rt.key, new)
        if errors:
            raise invalid(rt.kind, rt.group, name, errors)
    new["apiVersion"], new["kind"] = rt.api_version, rt.kind
    return new
