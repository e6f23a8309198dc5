"""PATCH bodies: JSON merge patch (RFC 7386), strategic merge patch, JSON patch (RFC 6902).

Strategic merge follows the patch strategies Kubernetes declares for the fields testbed and
kubectl patch: lists of containers, env, volumes … merge by their merge key; ``finalizers``
merge as a set; the ``$patch: delete|replace`` directives and ``$deleteFromPrimitiveList``
are honoured; ``$setElementOrder`` and ``$retainKeys`` are accepted and dropped. Lists
without a declared strategy are replaced, as the real server does.
"""

from __future__ import annotations

import copy
from typing import Any

from kubemu.storage.errors import ApiError, bad_request, unsupported_media

#: Field name → merge key of the list it holds (from the Kubernetes API's patchMergeKey).
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "conditions": "type",
    "imagePullSecrets": "name",
    "ownerReferences": "uid",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "addresses": "type",
    "resourceClaims": "name",
}
#: Lists of primitives merged as sets.
SET_LISTS = frozenset({"finalizers"})

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"


def apply_patch(content_type: str, target: dict[str, Any], patch: Any) -> dict[str, Any]:
    """A new object: ``target`` (not modified) with ``patch`` applied."""
    kind = content_type.split(";", maxsplit=1)[0].strip()
    if kind == MERGE:
        merged: dict[str, Any] = _merge(target, _object(patch))
        return merged
    if kind == STRATEGIC:
        strategic: dict[str, Any] = _strategic(target, _object(patch))
        return strategic
    if kind == JSON_PATCH:
        if not isinstance(patch, list):
            raise bad_request("a JSON patch must be a list of operations")
        return json_patch(target, patch)
    raise unsupported_media(kind)


def _object(patch: Any) -> dict[str, Any]:
    if not isinstance(patch, dict):
        raise bad_request("a merge patch must be a JSON object")
    return patch


def _merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge(out.get(key), value)
    return out


def _strategic(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key == "$retainKeys":
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            name = key.split("/", 1)[1]
            out[name] = [v for v in out.get(name) or [] if v not in value]
            continue
        if value is None:
            out.pop(key, None)
        elif isinstance(value, list) and key in MERGE_KEYS:
            out[key] = _merge_list(out.get(key) or [], value, MERGE_KEYS[key])
        elif isinstance(value, list) and key in SET_LISTS:
            current = list(out.get(key) or [])
            out[key] = current + [v for v in value if v not in current]
        else:
            merged = _strategic(out.get(key), value)
            if merged is None:
                out.pop(key, None)
            else:
                out[key] = merged
    return out


def _merge_list(current: list[Any], patch: list[Any], key: str) -> list[Any]:
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [copy.deepcopy(p) for p in patch if not (isinstance(p, dict) and "$patch" in p)]
    if key == "containerPort" and any(isinstance(p, dict) and "port" in p for p in patch):
        key = "port"  # a Service's ports merge by port, a container's by containerPort
    out = list(current)
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            out.append(copy.deepcopy(item))
            continue
        index = next(
            (i for i, c in enumerate(out) if isinstance(c, dict) and c.get(key) == item[key]), None
        )
        if item.get("$patch") == "delete":
            if index is not None:
                del out[index]
        elif index is None:
            out.append(_strategic({}, item))
        else:
            out[index] = _strategic(out[index], item)
    return out


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise bad_request(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str], path: str) -> Any:
    node = doc
    for part in parts[:-1]:
        try:
            node = node[int(part)] if isinstance(node, list) else node[part]
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            raise ApiError(422, "Invalid", f"path {path!r} does not exist") from exc
    return node


def _get(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        return doc
    parent = _parent(doc, parts, path)
    try:
        return parent[int(parts[-1])] if isinstance(parent, list) else parent[parts[-1]]
    except (KeyError, IndexError, ValueError, TypeError) as exc:
        raise ApiError(422, "Invalid", f"path {path!r} does not exist") from exc


def _remove(doc: Any, path: str) -> Any:
    value = _get(doc, path)
    parts = _pointer(path)
    parent = _parent(doc, parts, path)
    if isinstance(parent, list):
        del parent[int(parts[-1])]
    else:
        del parent[parts[-1]]
    return value


def _add(doc: Any, path: str, value: Any) -> Any:
    parts = _pointer(path)
    if not parts:
        return value
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, list):
        index = len(parent) if last == "-" else int(last)
        if index > len(parent):
            raise ApiError(422, "Invalid", f"index out of range in {path!r}")
        parent.insert(index, value)
    elif isinstance(parent, dict):
        parent[last] = value
    else:
        raise ApiError(422, "Invalid", f"cannot add at {path!r}")
    return doc


def json_patch(target: dict[str, Any], operations: list[Any]) -> dict[str, Any]:
    doc: Any = copy.deepcopy(target)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise bad_request(f"invalid JSON patch operation {op!r}")
        name, path = op["op"], op["path"]
        if name == "add":
            doc = _add(doc, path, copy.deepcopy(op.get("value")))
        elif name == "remove":
            _remove(doc, path)
        elif name == "replace":
            _get(doc, path)
            if _pointer(path):
                _remove(doc, path)
            doc = _add(doc, path, copy.deepcopy(op.get("value")))
        elif name in ("move", "copy"):
            value = (
                _remove(doc, op["from"]) if name == "move" else copy.deepcopy(_get(doc, op["from"]))
            )
            doc = _add(doc, path, value)
        elif name == "test":
            if _get(doc, path) != op.get("value"):
                raise ApiError(422, "Invalid", f"test operation failed at {path!r}")
        else:
            raise bad_request(f"unknown JSON patch operation {name!r}")
    if not isinstance(doc, dict):
        raise bad_request("a JSON patch must leave an object")
    return doc
