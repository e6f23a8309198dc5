"""Server-side apply: which manager owns which fields (``metadata.managedFields``), the
merge of an applied configuration, and conflicts worded as kube-apiserver words them.

A field set is a set of paths; a path is a tuple of elements written as in ``fieldsV1``:
``f:<field>``, ``k:<merge key JSON>`` for an item of a list merged by key (containers by
name …, the same keys as strategic merge patch), ``v:<JSON>`` for a member of a set list
(finalizers). Lists without a merge key, and label selectors, are atomic: one leaf.
An item of a keyed list is owned as ``<item path> + (".",)`` besides its fields.

Apply (:func:`apply_config`) follows structured-merge-diff's rules: the applied fields are
merged over the live object; a field another manager owns with a different value is a
conflict (409, ``FieldManagerConflict`` causes) unless ``force``, which takes it over; a
field this manager applied before, does not apply now and nobody else owns is removed.
Other writes through the API (POST, PUT, merge/strategic/JSON patches) are recorded as
the real server records them (:func:`record_update`): the fields they changed go to the
writer's ``Update`` entry (``fieldManager``, else the User-Agent's product) and leave
everyone else's, so a later apply that changes them conflicts with that writer
(``conflict with "kubectl-client-side-apply" using apps/v1: .spec.replicas``).
Controllers inside the emulator write through the store and are not recorded.
"""

from __future__ import annotations

import json
from typing import Any

from kubemu.storage.errors import ApiError, bad_request
from kubemu.storage.meta import now
from kubemu.storage.objects import Obj, clone
from kubemu.storage.patch import MERGE_KEYS, SET_LISTS
from kubemu.storage.resources import ResourceType

Path = tuple[str, ...]
APPLY = "application/apply-patch+yaml"
#: Top-level fields that identify the object rather than belong to a manager.
_IDENTITY = ("apiVersion", "kind")
_META_IDENTITY = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "managedFields",
    "creationTimestamp",
    "generation",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
)


def field_set(applied: Obj, has_status: bool) -> set[Path]:
    """The paths an applied configuration sets."""
    out: set[Path] = set()
    for key, value in applied.items():
        if key in _IDENTITY or (key == "status" and has_status):
            continue
        if key == "metadata" and isinstance(value, dict):
            owned = {k: v for k, v in value.items() if k not in _META_IDENTITY}
            if owned:
                _walk(owned, ("f:metadata",), key, out)
            continue
        _walk(value, (f"f:{key}",), key, out)
    return out


def _walk(value: Any, path: Path, name: str, out: set[Path]) -> None:
    if isinstance(value, dict) and value and not _atomic(name, value):
        for key, child in value.items():
            _walk(child, (*path, f"f:{key}"), key, out)
    elif isinstance(value, list) and name in MERGE_KEYS and all(_keyed(i, name) for i in value):
        for item in value:
            item_path = (*path, _item_key(item, name))
            out.add((*item_path, "."))
            for key, child in item.items():
                _walk(child, (*item_path, f"f:{key}"), key, out)
    elif isinstance(value, list) and name in SET_LISTS:
        out.update((*path, "v:" + json.dumps(v, separators=(",", ":"))) for v in value)
    else:
        out.add(path)


def _atomic(name: str, value: Obj) -> bool:
    """Label selectors are atomic maps (``x-kubernetes-map-type: atomic``)."""
    return name == "selector" and bool({"matchLabels", "matchExpressions"} & set(value))


def _merge_key(name: str, item: Obj) -> str:
    key = MERGE_KEYS[name]
    return "port" if key == "containerPort" and "port" in item else key


def _keyed(item: Any, name: str) -> bool:
    return isinstance(item, dict) and _merge_key(name, item) in item


def _item_key(item: Obj, name: str) -> str:
    key = _merge_key(name, item)
    return "k:" + json.dumps({key: item[key]}, separators=(",", ":"))


# -- fieldsV1 ----------------------------------------------------------------------------


def to_fields_v1(paths: set[Path]) -> Obj:
    """A field set as the nested ``fieldsV1`` object."""
    root: Obj = {}
    for path in sorted(paths):
        node = root
        for element in path:
            node = node.setdefault(element, {})
    return root


def from_fields_v1(tree: Obj, prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    for element, child in tree.items():
        path = (*prefix, element)
        if element == "." or not child:
            out.add(path)
        else:
            out |= from_fields_v1(child, path)
    return out


def path_string(path: Path) -> str:
    """A path as structured-merge-diff prints it: ``.spec.containers[name="c"].image``."""
    text = ""
    for element in path:
        kind, _, rest = element.partition(":")
        if element == ".":
            continue
        if kind == "f":
            text += f".{rest}"
        elif kind == "k":
            pairs = json.loads(rest)
            text += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in pairs.items()) + "]"
        else:
            text += f"[={rest}]"
    return text


# -- reading and writing values at paths -------------------------------------------------

_MISSING = object()


def value_at(obj: Any, path: Path) -> Any:
    node = obj
    for element in path:
        if element == ".":
            return node
        kind, _, rest = element.partition(":")
        if kind == "f" and isinstance(node, dict) and rest in node:
            node = node[rest]
        elif kind == "k" and isinstance(node, list):
            ((key, want),) = json.loads(rest).items()
            node = next((i for i in node if isinstance(i, dict) and i.get(key) == want), _MISSING)
        elif kind == "v" and isinstance(node, list):
            node = json.loads(rest) if json.loads(rest) in node else _MISSING
        else:
            return _MISSING
        if node is _MISSING:
            return _MISSING
    return node


def remove_at(obj: Any, path: Path) -> None:
    """Delete the field, list item or set member at ``path`` (nothing when absent)."""
    if path and path[-1] == ".":
        path = path[:-1]
    parent = value_at(obj, path[:-1]) if len(path) > 1 else obj
    kind, _, rest = path[-1].partition(":")
    if kind == "f" and isinstance(parent, dict):
        parent.pop(rest, None)
    elif kind == "k" and isinstance(parent, list):
        ((key, want),) = json.loads(rest).items()
        parent[:] = [i for i in parent if not (isinstance(i, dict) and i.get(key) == want)]
    elif kind == "v" and isinstance(parent, list):
        parent[:] = [v for v in parent if v != json.loads(rest)]


def merge_applied(live: Any, applied: Any, name: str = "") -> Any:
    """``applied`` over ``live``: maps merge, keyed lists merge by key, the rest replaces."""
    if isinstance(applied, dict) and isinstance(live, dict) and not _atomic(name, applied):
        out = dict(live)
        for key, value in applied.items():
            out[key] = merge_applied(live.get(key), value, key)
        return out
    if (
        isinstance(applied, list)
        and isinstance(live, list)
        and name in MERGE_KEYS
        and all(_keyed(i, name) for i in applied + live)
    ):
        merged = list(live)
        for item in applied:
            key = _merge_key(name, item)
            index = next((n for n, i in enumerate(merged) if i.get(key) == item[key]), None)
            if index is None:
                merged.append(clone(item))
            else:
                merged[index] = merge_applied(merged[index], item)
        return merged
    if isinstance(applied, list) and isinstance(live, list) and name in SET_LISTS:
        return live + [v for v in applied if v not in live]
    return clone(applied)


# -- managers ----------------------------------------------------------------------------


def managers(obj: Obj | None) -> dict[str, tuple[Obj, set[Path]]]:
    """Each entry of ``managedFields`` by its key (the manager; ``<manager> using
    <apiVersion>`` for an Update entry, as the server prints it): the entry, its fields."""
    out: dict[str, tuple[Obj, set[Path]]] = {}
    for entry in (obj or {}).get("metadata", {}).get("managedFields") or []:
        if isinstance(entry, dict) and entry.get("manager"):
            out[_key(entry)] = (entry, from_fields_v1(entry.get("fieldsV1") or {}))
    return out


def _key(entry: Obj) -> str:
    name = json.dumps(str(entry["manager"]))
    if entry.get("operation") == "Update":
        return f"{name} using {entry.get('apiVersion')}"
    return name


def owners_after_update(
    rt: ResourceType, current: Obj, new: Obj, managed: list[Obj] | None, updater: str | None
) -> list[Obj] | None:
    """The managedFields of an update: given (apply), recorded for ``updater``, or kept."""
    if managed is not None:
        return managed
    if updater:
        return record_update(current, new, updater, rt.api_version, rt.has_status)
    kept: list[Obj] | None = current["metadata"].get("managedFields")
    return kept


def check_applied(body: Any, name: str) -> None:
    """An applied configuration is an object with metadata naming the URL's object."""
    meta = body.get("metadata") if isinstance(body, dict) else None
    if not isinstance(meta, dict):
        raise bad_request("an applied configuration must be an object with metadata")
    if meta.get("name", name) != name:
        raise bad_request(
            f"the name of the object ({meta.get('name')}) does not match the name on the URL"
            f" ({name})"
        )


def record_update(
    live: Obj | None, new: Obj, manager: str, api_version: str, has_status: bool
) -> list[Obj]:
    """managedFields after ``manager`` wrote ``new`` over ``live`` (None: created) with an
    operation other than apply: the fields it changed become its own, nobody else's."""
    now_set = field_set(new, has_status)
    before = field_set(live, has_status) if live is not None else set()
    changed = {p for p in now_set if live is None or value_at(live, p) != value_at(new, p)}
    gone = before - now_set
    mine_entry: Obj = {
        "manager": manager,
        "operation": "Update",
        "apiVersion": api_version,
        "fieldsType": "FieldsV1",
    }
    owners = managers(live)
    current_entries = [entry for entry, _ in owners.values()]
    if not changed and not gone:
        return current_entries
    _, mine = owners.pop(_key(mine_entry), ({}, set()))
    entries = [
        {**entry, "fieldsV1": to_fields_v1(owned - changed - gone)}
        for entry, owned in owners.values()
        if owned - changed - gone
    ]
    owned_now = (mine | changed) - gone
    if owned_now:
        mine_entry["time"] = now()
        mine_entry["fieldsV1"] = to_fields_v1(owned_now)
        entries.append(mine_entry)
    return entries


def conflicts(
    live: Obj, applied: Obj, wanted: set[Path], owners: dict[str, tuple[Obj, set[Path]]]
) -> list[tuple[str, Path]]:
    """(manager, path) for each field another manager owns with a different value."""
    found = []
    for manager, (_entry, owned) in sorted(owners.items()):
        for path in sorted(wanted & owned):
            if path[-1] != "." and value_at(live, path) != value_at(applied, path):
                found.append((manager, path))
    return found


def conflict_error(found: list[tuple[str, Path]]) -> ApiError:
    """409 as ``internal.NewConflictError`` of the API server words it."""
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f"conflict with {m}",
            "field": path_string(p),
        }
        for m, p in found
    ]
    if len(found) == 1:
        manager, path = found[0]
        text = f"Apply failed with 1 conflict: conflict with {manager}: {path_string(path)}"
    else:
        lines = []
        for manager in sorted({m for m, _ in found}):
            lines.append(f"conflicts with {manager}:")
            lines += [f"- {path_string(p)}" for m, p in found if m == manager]
        text = f"Apply failed with {len(found)} conflicts: " + "\n".join(lines)
    return ApiError(409, "Conflict", text, {"causes": causes})


def apply_config(
    live: Obj | None, applied: Obj, manager: str, force: bool, api_version: str, has_status: bool
) -> Obj:
    """The object after ``manager`` applies ``applied`` to ``live`` (None: absent)."""
    wanted = field_set(applied, has_status)
    body = {k: v for k, v in applied.items() if not (k == "status" and has_status)}
    if live is None:
        new = clone(body)
        owners: dict[str, tuple[Obj, set[Path]]] = {}
    else:
        owners = managers(live)
        previous = owners.pop(json.dumps(manager), ({}, set()))
        found = conflicts(live, body, wanted, owners)
        if found and not force:
            raise conflict_error(found)
        for other, (entry, owned) in list(owners.items()):
            owners[other] = (entry, owned - {p for _, p in found})
        new = merge_applied(clone(live), body)
        others = set().union(*(owned for _, owned in owners.values()))
        for path in _removals(previous[1] - wanted - others):
            remove_at(new, path)
        if previous[1] == wanted and _without_managed(new) == _without_managed(live):
            return live  # a no-op apply keeps the object, time and version as they are
    entries = [
        {**entry, "fieldsV1": to_fields_v1(owned)} for entry, owned in owners.values() if owned
    ]
    if wanted:  # a manager that owns nothing has no entry
        entries.append(
            {
                "manager": manager,
                "operation": "Apply",
                "apiVersion": api_version,
                "time": now(),
                "fieldsType": "FieldsV1",
                "fieldsV1": to_fields_v1(wanted),
            }
        )
    new.setdefault("metadata", {})["managedFields"] = entries
    return new


def _removals(gone: set[Path]) -> list[Path]:
    """The paths to remove, deepest first, and at one depth a keyed list's item before its
    fields: removing its key field first would leave the item behind, no longer found by
    its key, as an empty object (a set's order changes from one process to the next)."""
    return sorted(gone, key=lambda p: (-len(p), p[-1] != "."))


def _without_managed(obj: Obj) -> Obj:
    meta = {k: v for k, v in obj.get("metadata", {}).items() if k != "managedFields"}
    return {**obj, "metadata": meta}
