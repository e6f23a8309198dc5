"""Subresources beyond ``/status``: scale, pods' binding and eviction, namespaces' finalize.

``/scale`` is an ``autoscaling/v1 Scale`` view of a workload's replicas (``kubectl scale``
PATCHes it); a binding sets a pod's node and its PodScheduled condition, as the scheduler's
POST does; an eviction deletes the pod with the grace period it carries.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from kubemu.apiserver.routes import Target
from kubemu.storage import meta as _meta
from kubemu.storage.errors import (
    ApiError,
    bad_request,
    conflict,
    invalid,
    method_not_allowed,
)
from kubemu.storage.patch import apply_patch

if TYPE_CHECKING:
    from kubemu.storage.store import Store

Obj = dict[str, Any]


def _at(obj: Obj, path: str) -> Any:
    node: Any = obj
    for part in path.lstrip(".").split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def set_path(obj: Obj, path: str, value: Any) -> None:
    """Set ``value`` at a ``.a.b`` path, making the dicts on the way."""
    *parents, leaf = path.lstrip(".").split(".")
    node = obj
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value


def scale_of(
    obj: Obj, paths: tuple[str, str, str] = (".spec.replicas", ".status.replicas", "")
) -> Obj:
    """The ``autoscaling/v1 Scale`` view of a workload (``paths``: see ResourceType.scale_paths)."""
    meta = obj["metadata"]
    spec_path, status_path, selector_path = paths
    if selector_path:
        selector = str(_at(obj, selector_path) or "")
    else:
        labels = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        selector = ",".join(f"{k}={v}" for k, v in labels.items())
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": {"replicas": _at(obj, spec_path) or 0},
        "status": {"replicas": _at(obj, status_path) or 0, "selector": selector},
    }


def _json(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise bad_request(f"the body of the request is not valid JSON: {exc}") from exc


def _respond(body: Obj, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type="application/json")


async def serve(store: Store, request: web.Request, t: Target) -> web.StreamResponse:
    assert t.name is not None
    key, method = t.rt.key, request.method
    if t.subresource == "scale":
        current = store.get(key, t.namespace, t.name)
        if method == "GET":
            return _respond(scale_of(current, t.rt.scale_paths))
        if method not in ("PUT", "PATCH"):
            raise method_not_allowed(f"{method} is not allowed on scale")
        body = _json(await request.read())
        if method == "PATCH":
            body = apply_patch(
                request.headers.get("Content-Type", ""), scale_of(current, t.rt.scale_paths), body
            )
        wanted_rv = (body.get("metadata") or {}).get("resourceVersion")
        if wanted_rv and wanted_rv != current["metadata"]["resourceVersion"]:
            raise conflict(t.rt.plural, t.rt.group, t.name)
        replicas = (body.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or replicas < 0:
            shown = json_value(replicas)
            why = (
                "must be greater than or equal to 0"
                if isinstance(replicas, int)
                else "must be an integer"
            )
            raise invalid(
                "Scale",
                "autoscaling",
                t.name,
                [("spec.replicas", f"Invalid value: {shown}: {why}")],
            )

        def set_replicas(obj: Obj) -> None:
            set_path(obj, t.rt.scale_paths[0], replicas)

        return _respond(
            scale_of(store.mutate(key, t.namespace, t.name, set_replicas), t.rt.scale_paths)
        )
    if method == "POST" and t.subresource == "binding":
        return _respond(_bind(store, t, _json(await request.read())), 201)
    if method == "POST" and t.subresource == "eviction":
        body = _json(await request.read())
        grace = ((body.get("deleteOptions") or {}) if isinstance(body, dict) else {}).get(
            "gracePeriodSeconds"
        )
        store.delete(key, t.namespace, t.name, None, grace)
        return _respond(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "code": 201,
            },
            201,
        )
    if method == "PUT" and t.subresource == "finalize":
        return _respond(store.get(key, t.namespace, t.name))
    raise ApiError(
        404,
        "NotFound",
        f"the server could not find the requested resource ({t.rt.plural}/{t.subresource})",
    )


def _bind(store: Store, t: Target, body: Any) -> Obj:
    assert t.name is not None
    node = ((body or {}).get("target") or {}).get("name") if isinstance(body, dict) else None
    if not node:
        raise invalid("Binding", "", t.name, [("target.name", "Required value")])
    pod = store.get("pods", t.namespace, t.name)
    if pod["spec"].get("nodeName"):
        raise ApiError(
            409, "Conflict", f'pod {t.name} is already assigned to node "{pod["spec"]["nodeName"]}"'
        )
    bind_pod(store, t.namespace or "default", t.name, node)
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def bind_pod(store: Any, namespace: str, name: str, node: str) -> Obj:
    """Assign a pod to ``node`` with its PodScheduled condition, as a Binding does."""
    pod = store.get("pods", namespace, name)
    draft = orjson.loads(orjson.dumps(pod))
    draft["spec"]["nodeName"] = node
    status = draft.setdefault("status", {})
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
    conditions.append(
        {
            "type": "PodScheduled",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": _meta.now(),
        }
    )
    status["conditions"] = conditions
    stored: Obj = store.commit("pods", pod, draft)
    return stored


def json_value(value: Any) -> str:
    """A value as a field error shows it (``Invalid value: -1``, ``Invalid value: "x"``)."""
    return orjson.dumps(value).decode()
