"""What a request gives the API server beyond its URL: its body, who writes, how to delete,
which page of a list.

The body is JSON, protobuf (the official client's ``application/vnd.kubernetes.protobuf``)
or, for server-side apply, YAML; a body whose ``kind``/``apiVersion`` is not the URL's is a
400. The field manager is ``fieldManager`` or the User-Agent's product, as the real server
names an Update's manager. ``limit``/``continue`` page a list; delete options come from the
body or the query. Every refusal is an :class:`ApiError` (400 or 415).
"""

from __future__ import annotations

import base64
from typing import Any

import orjson
from aiohttp import web

from kubemu.apiserver import protobuf
from kubemu.machinery.handlers import query_flag
from kubemu.storage.errors import bad_request, unsupported_media
from kubemu.storage.resources import ResourceType

Obj = dict[str, Any]


def check_kind(rt: ResourceType, body: Obj) -> None:
    kind, version = body.get("kind"), body.get("apiVersion")
    if kind and kind != rt.kind:
        raise bad_request(
            f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})"
        )
    if version and version != rt.api_version:
        raise bad_request(
            f"the API version in the data ({version}) does not match the expected API version"
            f" ({rt.api_version})"
        )


def field_manager(request: web.Request) -> str | None:
    """Who writes: ``fieldManager``, else the product of the User-Agent (``kubectl/v1.32``
    → ``kubectl``), as the API server names an Update's manager."""
    named = request.query.get("fieldManager")
    if named:
        return named
    agent = request.headers.get("User-Agent", "").split("/", 1)[0].strip()
    return agent or None


def media_type(request: web.Request) -> str:
    return request.headers.get("Content-Type", "").split(";")[0].strip()


async def applied_body(request: web.Request) -> Obj:
    """An applied configuration: YAML (JSON is YAML too)."""
    import yaml

    try:
        body = yaml.safe_load(await request.read())
    except yaml.YAMLError as exc:
        raise bad_request(f"the applied configuration is not valid YAML: {exc}") from exc
    if not isinstance(body, dict):
        raise bad_request("the applied configuration must be an object")
    return body


async def json_body(request: web.Request) -> Any:
    content_type = request.headers.get("Content-Type", "application/json").split(";")[0].strip()
    if request.method != "PATCH" and content_type == protobuf.MEDIA_TYPE:
        return protobuf.decode(await request.read())
    if request.method != "PATCH" and content_type not in ("application/json", "*/*", ""):
        raise unsupported_media(content_type)
    raw = await request.read()
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise bad_request(f"the body of the request is not valid JSON: {exc}") from exc


async def object_body(request: web.Request) -> Obj:
    body = await json_body(request)
    if not isinstance(body, dict):
        raise bad_request("the body of the request must be a JSON object")
    return body


async def optional_object(request: web.Request) -> Obj:
    if not request.can_read_body:
        return {}
    body = await json_body(request)
    return body if isinstance(body, dict) else {}


def delete_options(request: web.Request, body: Obj) -> tuple[str | None, int | None]:
    propagation = body.get("propagationPolicy") or request.query.get("propagationPolicy")
    if body.get("orphanDependents") is True or query_flag(request.query.get("orphanDependents")):
        propagation = "Orphan"
    if propagation not in (None, "Background", "Foreground", "Orphan"):
        raise bad_request(f"unsupported propagationPolicy {propagation!r}")
    grace = body.get("gracePeriodSeconds", request.query.get("gracePeriodSeconds"))
    try:
        return propagation, None if grace is None else int(grace)
    except ValueError:
        raise bad_request(f"invalid gracePeriodSeconds {grace!r}") from None


def page(request: web.Request, items: list[Obj], meta: Obj) -> list[Obj]:
    """Apply ``limit``/``continue`` (the token is the key of the last object returned)."""
    token = request.query.get("continue")
    if token:
        try:
            after = tuple(orjson.loads(base64.urlsafe_b64decode(token.encode())))
        except ValueError:
            raise bad_request("invalid continue token") from None
        items = [
            o for o in items if (o["metadata"].get("namespace", ""), o["metadata"]["name"]) > after
        ]
    limit = int(request.query.get("limit") or 0)
    if limit <= 0 or len(items) <= limit:
        return items
    last = items[limit - 1]["metadata"]
    key = [last.get("namespace", ""), last["name"]]
    meta["continue"] = base64.urlsafe_b64encode(orjson.dumps(key)).decode()
    meta["remainingItemCount"] = len(items) - limit
    return items[:limit]
