"""The REST handlers: one aiohttp handler that routes every Kubernetes API request.

Requests are authenticated (:mod:`authn`), authorized by RBAC (:mod:`rbac`; off with
``rbac=False``), routed (:mod:`routes`), answered from the
:class:`Store` in the requested view (:mod:`views`) and form (JSON, or a Table for
kubectl), and every refusal is a ``Status`` object with the real server's code and reason.
Subresources that need a running pod (log, portforward, exec) are served by handlers the
controllers register with :meth:`Api.add_subresource`.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson
from aiohttp import web

from testbed.emulator.apiserver import discovery, openapi, protobuf, subresources, tables, views
from testbed.emulator.apiserver.authn import Authenticator, UserInfo
from testbed.emulator.apiserver.rbac import Attributes, Authorizer, verb_of
from testbed.emulator.apiserver.reviews import REVIEW_PATHS, review
from testbed.emulator.apiserver.routes import Target, parse
from testbed.emulator.apiserver.streaming import stream_error, stream_events
from testbed.emulator.machinery.handlers import SubresourceHandler, query_flag
from testbed.emulator.storage.errors import (
    ApiError,
    bad_request,
    invalid,
    method_not_allowed,
    unsupported_media,
)
from testbed.emulator.storage.managed import APPLY
from testbed.emulator.storage.resources import ResourceType
from testbed.emulator.storage.store import Store
from testbed.emulator.storage.watchers import Event

Obj = dict[str, Any]
_NOT_FOUND = ApiError(404, "NotFound", "the server could not find the requested resource")
_HEALTH = frozenset({"/healthz", "/livez", "/readyz"})


def json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type="application/json")


class Api:
    """Routes and answers API requests against one store."""

    def __init__(self, store: Store, token: str | None, *, rbac: bool = True) -> None:
        self.store = store
        self.authn = Authenticator(store, token)
        #: None when every authenticated request is allowed (``--no-rbac``).
        self.authz: Authorizer | None = Authorizer(store) if rbac else None
        self.ca_pem = b""
        self._extensions: dict[tuple[str, str], SubresourceHandler] = {}
        self.server_address = "127.0.0.1:0"

    def add_subresource(self, key: str, subresource: str, handler: SubresourceHandler) -> None:
        """Serve ``<type>/<name>/<subresource>`` (e.g. ``pods``, ``log``) with ``handler``."""
        self._extensions[(key, subresource)] = handler

    async def handle(self, request: web.Request) -> web.StreamResponse:
        try:
            path = request.path.rstrip("/") or "/"
            if path in _HEALTH:
                return web.Response(text="ok")
            user = self.authn.user(request.headers.get("Authorization", ""))
            if path in REVIEW_PATHS:
                if request.method != "POST":
                    raise method_not_allowed(f"{request.method} is not allowed on {path}")
                return json_response(review(self.authz, user, path, await _body(request)), 201)
            target = parse(self.store.registry, path)
            self._authorize(request, user, path, target)
            doc = self._discovery(path)
            if doc is not None:
                if request.method != "GET":
                    raise method_not_allowed(f"{request.method} is not allowed on {path}")
                return json_response(doc)
            if target is None:
                raise _NOT_FOUND
            return await self._dispatch(request, target)
        except ApiError as exc:
            return json_response(exc.status(), exc.code)

    def _authorize(self, request: web.Request, user: UserInfo, path: str, t: Target | None) -> None:
        if self.authz is None:
            return
        if t is None:
            verb = request.method.lower().replace("head", "get")
            attrs = Attributes(user, verb, path=path, resource_request=False)
        else:
            attrs = request_attributes(request, user, t)
        self.authz.check(attrs)

    def _discovery(self, path: str) -> Obj | None:
        registry = self.store.registry
        parts = [p for p in path.split("/") if p]
        if path == "/version":
            return discovery.version()
        if parts == ["api"]:
            return discovery.api_versions(self.server_address)
        if parts == ["apis"]:
            return discovery.api_groups(registry)
        if len(parts) == 2 and parts[0] == "api":
            return discovery.resource_list(registry, "", parts[1]) or _raise(_NOT_FOUND)
        if len(parts) == 2 and parts[0] == "apis":
            return discovery.api_group(registry, parts[1]) or _raise(_NOT_FOUND)
        if len(parts) == 3 and parts[0] == "apis":
            return discovery.resource_list(registry, parts[1], parts[2]) or _raise(_NOT_FOUND)
        if parts == ["openapi", "v3"]:
            return openapi.index(registry)
        if parts[:2] == ["openapi", "v3"]:
            return openapi.group_version(registry, "/".join(parts[2:])) or _raise(_NOT_FOUND)
        if parts[:1] == ["openapi"]:
            raise _NOT_FOUND  # no v2 document: kubectl uses v3 when it is served
        return None

    async def _dispatch(self, request: web.Request, t: Target) -> web.StreamResponse:
        method = request.method
        if t.subresource is not None and (t.rt.key, t.subresource) in self._extensions:
            assert t.name is not None
            return await self._extensions[(t.rt.key, t.subresource)](request, t.namespace, t.name)
        if "dryRun" in request.query:
            raise bad_request("dryRun is not supported by the testbed emulator")
        if t.name is None:
            if method == "GET":
                if t.watch_prefix or query_flag(request.query.get("watch")):
                    return await self._watch(request, t)
                return self._list(request, t)
            if method == "POST":
                created = self._create(t, await _body(request), _manager(request))
                return json_response(self._out(t.rt, created), 201)
            if method == "DELETE":
                return self._delete_collection(request, t, await _json_or_empty(request))
            raise method_not_allowed(f"{method} is not allowed on a collection")
        if t.subresource in (None, "status"):
            return await self._object(request, t)
        if t.rt.key == "serviceaccounts" and t.subresource == "token" and method == "POST":
            assert t.name is not None
            sa = self.store.get("serviceaccounts", t.namespace, t.name)
            spec = (await _json_or_empty(request)).get("spec") or {}
            return json_response(self.authn.token_request(sa, spec), 201)
        return await subresources.serve(self.store, request, t)

    # -- collections -------------------------------------------------------------------
    def _selectors(self, request: web.Request, t: Target) -> tuple[str | None, str | None]:
        fields = views.selector_in_storage(t.rt, request.query.get("fieldSelector"))
        return request.query.get("labelSelector"), fields

    def _list(self, request: web.Request, t: Target) -> web.Response:
        labels, fields = self._selectors(request, t)
        items, rv = self.store.list(t.rt.key, t.namespace, labels, fields)
        meta: Obj = {"resourceVersion": str(rv)}
        items = _page(request, items, meta)
        if tables.wants_table(request.headers.get("Accept", "")):
            shown = [self._out(t.rt, o) for o in items]
            body = tables.table(
                t.rt, shown, str(rv), request.query.get("includeObject", "Metadata")
            )
            body["metadata"].update(meta)
            return json_response(body)
        if not views.is_identity(t.rt, self.store.bucket(t.rt.key).rt.api_version):
            items = [views.to_view(t.rt, o) for o in items]
        return json_response(
            {
                "kind": t.rt.list_kind,
                "apiVersion": t.rt.api_version,
                "metadata": meta,
                "items": items,
            }
        )

    async def _watch(self, request: web.Request, t: Target) -> web.StreamResponse:
        labels, fields = self._selectors(request, t)
        query = request.query
        try:
            watch = self.store.watch(
                t.rt.key, t.namespace, query.get("resourceVersion"), labels, fields
            )
        except ApiError as exc:
            if exc.code != 410:
                raise
            return await stream_error(request, exc.status())
        timeout = float(query["timeoutSeconds"]) if query.get("timeoutSeconds") else None
        rt = t.rt
        identity = views.is_identity(rt, self.store.bucket(rt.key).rt.api_version)
        if tables.wants_table(request.headers.get("Accept", "")):
            include = query.get("includeObject", "Metadata")

            def line(event: Event) -> bytes:
                row = tables.table(rt, [views.to_view(rt, event.object)], str(event.rv), include)
                return orjson.dumps({"type": event.type, "object": row}) + b"\n"
        elif identity:

            def line(event: Event) -> bytes:
                return event.line()

        else:

            def line(event: Event) -> bytes:
                return (
                    orjson.dumps({"type": event.type, "object": views.to_view(rt, event.object)})
                    + b"\n"
                )

        def bookmark() -> Obj:
            meta = {"resourceVersion": str(self.store.resource_version)}
            return {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta}

        bookmarks = bookmark if query_flag(query.get("allowWatchBookmarks")) else None
        return await stream_events(request, watch, line, timeout, bookmarks)

    def _create(self, t: Target, body: Obj, manager: str | None) -> Obj:
        stored_version = self.store.bucket(t.rt.key).rt.api_version
        _check_kind(t.rt, body)
        stored = views.from_view(t.rt, body, stored_version)
        identity = stored_version == t.rt.api_version
        created = self.store.create(
            t.rt.key, stored, t.namespace, updater=manager if identity else None
        )
        if t.rt.key == "secrets":  # the token controller fills a service-account-token Secret
            filled = self.authn.fill_token_secret(created, self.ca_pem)
            if filled is not None:
                meta = created["metadata"]
                created = self.store.replace("secrets", meta["namespace"], meta["name"], filled)
        return created

    def _delete_collection(self, request: web.Request, t: Target, options: Obj) -> web.Response:
        labels, fields = self._selectors(request, t)
        items, _ = self.store.list(t.rt.key, t.namespace, labels, fields)
        propagation, grace = _delete_options(request, options)
        for obj in items:
            meta = obj["metadata"]
            if self.store.try_get(t.rt.key, meta.get("namespace"), meta["name"]) is obj:
                self.store.delete(t.rt.key, meta.get("namespace"), meta["name"], propagation, grace)
        return json_response(
            {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
        )

    # -- one object --------------------------------------------------------------------
    async def _object(self, request: web.Request, t: Target) -> web.StreamResponse:
        assert t.name is not None
        key, method = t.rt.key, request.method
        if method == "GET":
            obj = self.store.get(key, t.namespace, t.name)
            if tables.wants_table(request.headers.get("Accept", "")):
                shown = self._out(t.rt, obj)
                include = request.query.get("includeObject", "Metadata")
                return json_response(
                    tables.table(t.rt, [shown], obj["metadata"]["resourceVersion"], include)
                )
            return json_response(self._out(t.rt, obj))
        if method == "PUT":
            body = await _body(request)
            _check_kind(t.rt, body)
            stored = views.from_view(t.rt, body, self.store.bucket(key).rt.api_version)
            manager = _manager(request) if t.subresource is None else None
            replaced = self.store.replace(
                key, t.namespace, t.name, stored, t.subresource, updater=manager
            )
            return json_response(self._out(t.rt, replaced))
        if method == "PATCH" and _media(request) == APPLY:
            obj, created = self._apply(request, t, await _applied(request))
            return json_response(self._out(t.rt, obj), 201 if created else 200)
        if method == "PATCH":
            return json_response(self._out(t.rt, self._patch(request, t, await _json(request))))
        if method == "DELETE" and t.subresource is None:
            options = await _json_or_empty(request)
            propagation, grace = _delete_options(request, options)
            obj = self.store.delete(
                key, t.namespace, t.name, propagation, grace, options.get("preconditions")
            )
            return json_response(self._out(t.rt, obj))
        raise method_not_allowed(f"{method} is not allowed here")

    def _patch(self, request: web.Request, t: Target, body: Any) -> Obj:
        assert t.name is not None
        content_type = request.headers.get("Content-Type", "")
        if views.is_identity(t.rt, self.store.bucket(t.rt.key).rt.api_version):
            manager = _manager(request) if t.subresource is None else None
            return self.store.patch(
                t.rt.key, t.namespace, t.name, content_type, body, t.subresource, manager
            )
        from testbed.emulator.storage.patch import apply_patch

        current = views.to_view(t.rt, self.store.get(t.rt.key, t.namespace, t.name))
        patched = views.from_view(
            t.rt,
            apply_patch(content_type, current, body),
            self.store.bucket(t.rt.key).rt.api_version,
        )
        return self.store.replace(t.rt.key, t.namespace, t.name, patched, t.subresource)

    def _apply(self, request: web.Request, t: Target, body: Obj) -> tuple[Obj, bool]:
        """Server-side apply (``application/apply-patch+yaml``); creates when absent."""
        assert t.name is not None
        manager = request.query.get("fieldManager")
        if not manager:
            raise invalid(
                "PatchOptions",
                "meta.k8s.io",
                "",
                [("fieldManager", "Required value: is required for apply patch")],
            )
        if t.subresource is not None:
            raise bad_request(f"server-side apply to /{t.subresource} is not supported here")
        if not views.is_identity(t.rt, self.store.bucket(t.rt.key).rt.api_version):
            raise bad_request(f"server-side apply of {t.rt.api_version} is not supported here")
        _check_kind(t.rt, body)
        force = query_flag(request.query.get("force"))
        return self.store.apply(t.rt.key, t.namespace, t.name, body, manager, force)

    def _out(self, rt: ResourceType, obj: Obj) -> Obj:
        return views.to_view(rt, obj)


def request_attributes(request: web.Request, user: UserInfo, t: Target) -> Attributes:
    """What the request asks for, as kube-apiserver's request-info fills it in."""
    watch = t.watch_prefix or query_flag(request.query.get("watch"))
    name = t.name or ""
    if not name and request.method == "GET":  # list/watch of one object by field selector
        field = request.query.get("fieldSelector") or ""
        if field.startswith("metadata.name=") and "," not in field:
            name = field.partition("=")[2]
    namespace = t.namespace or ""
    if t.rt.key == "namespaces" and t.name:
        namespace = t.name  # a Namespace's own URL is in that namespace
    return Attributes(
        user,
        verb_of(request.method, t.name is not None, watch),
        t.rt.group,
        t.rt.plural,
        t.subresource or "",
        namespace,
        name,
        request.path,
    )


def _raise(exc: ApiError) -> Obj:
    raise exc


def _check_kind(rt: ResourceType, body: Obj) -> None:
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


def _manager(request: web.Request) -> str | None:
    """Who writes: ``fieldManager``, else the product of the User-Agent (``kubectl/v1.32``
    → ``kubectl``), as the API server names an Update's manager."""
    named = request.query.get("fieldManager")
    if named:
        return named
    agent = request.headers.get("User-Agent", "").split("/", 1)[0].strip()
    return agent or None


def _media(request: web.Request) -> str:
    return request.headers.get("Content-Type", "").split(";")[0].strip()


async def _applied(request: web.Request) -> Obj:
    """An applied configuration: YAML (JSON is YAML too)."""
    import yaml

    try:
        body = yaml.safe_load(await request.read())
    except yaml.YAMLError as exc:
        raise bad_request(f"the applied configuration is not valid YAML: {exc}") from exc
    if not isinstance(body, dict):
        raise bad_request("the applied configuration must be an object")
    return body


async def _json(request: web.Request) -> Any:
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


async def _body(request: web.Request) -> Obj:
    body = await _json(request)
    if not isinstance(body, dict):
        raise bad_request("the body of the request must be a JSON object")
    return body


async def _json_or_empty(request: web.Request) -> Obj:
    if not request.can_read_body:
        return {}
    body = await _json(request)
    return body if isinstance(body, dict) else {}


def _delete_options(request: web.Request, body: Obj) -> tuple[str | None, int | None]:
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


def _page(request: web.Request, items: list[Obj], meta: Obj) -> list[Obj]:
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
