"""The REST handlers: one aiohttp handler that routes every Kubernetes API request.

Requests are authenticated (:mod:`authn`), authorized by RBAC (:mod:`rbac`; off with
``rbac=False``), routed (:mod:`routes`), answered from the
:class:`Store` in the requested view (:mod:`views`) and form (JSON, or a Table for
kubectl), and every refusal is a ``Status`` object with the real server's code and reason.
Subresources that need a running pod (log, portforward, exec) are served by handlers the
controllers register with :meth:`Api.add_subresource`.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from kubefacts.limits import MAX_REQUEST_BODY_BYTES
from kubemu.apiserver import (
    discovery,
    escalation,
    openapi,
    subresources,
    tables,
    views,
)
from kubemu.apiserver.authn import Authenticator, UserInfo
from kubemu.apiserver.rbac import Attributes, Authorizer, verb_of
from kubemu.apiserver.request_input import (
    applied_body,
    check_kind,
    delete_options,
    field_manager,
    json_body,
    media_type,
    object_body,
    optional_object,
    page,
)
from kubemu.apiserver.reviews import REVIEW_PATHS, review
from kubemu.apiserver.routes import Target, parse
from kubemu.apiserver.streaming import stream_error, stream_events
from kubemu.machinery.handlers import SubresourceHandler, query_flag
from kubemu.storage.errors import (
    ApiError,
    bad_request,
    entity_too_large,
    invalid,
    method_not_allowed,
)
from kubemu.storage.managed import APPLY, apply_config
from kubemu.storage.patch import apply_patch
from kubemu.storage.resources import ResourceType
from kubemu.storage.store import Store
from kubemu.storage.watchers import Event

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
                return json_response(
                    review(self.authz, user, path, await object_body(request)), 201
                )
            target = parse(self.store.registry, path)
            self._authorize(request, user, path, target)
            doc = self._discovery(path)
            if doc is not None:
                if request.method != "GET":
                    raise method_not_allowed(f"{request.method} is not allowed on {path}")
                return json_response(doc)
            if target is None:
                raise _NOT_FOUND
            return await self._dispatch(request, target, user)
        except ApiError as exc:
            return json_response(exc.status(), exc.code)
        except web.HTTPRequestEntityTooLarge:  # a body over client_max_size, as aiohttp reads
            refused = entity_too_large(MAX_REQUEST_BODY_BYTES)
            return json_response(refused.status(), refused.code)

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

    async def _dispatch(
        self, request: web.Request, t: Target, user: UserInfo
    ) -> web.StreamResponse:
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
                body = await object_body(request)
                self._guard(user, t, body)
                created = self._create(t, body, field_manager(request))
                return json_response(self._out(t.rt, created), 201)
            if method == "DELETE":
                return self._delete_collection(request, t, await optional_object(request))
            raise method_not_allowed(f"{method} is not allowed on a collection")
        if t.subresource in (None, "status"):
            return await self._object(request, t, user)
        if t.rt.key == "serviceaccounts" and t.subresource == "token" and method == "POST":
            assert t.name is not None
            sa = self.store.get("serviceaccounts", t.namespace, t.name)
            spec = (await optional_object(request)).get("spec") or {}
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
        items = page(request, items, meta)
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
        check_kind(t.rt, body)
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
        propagation, grace = delete_options(request, options)
        for obj in items:
            meta = obj["metadata"]
            if self.store.try_get(t.rt.key, meta.get("namespace"), meta["name"]) is obj:
                self.store.delete(t.rt.key, meta.get("namespace"), meta["name"], propagation, grace)
        return json_response(
            {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
        )

    # -- one object --------------------------------------------------------------------
    async def _object(self, request: web.Request, t: Target, user: UserInfo) -> web.StreamResponse:
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
            body = await object_body(request)
            check_kind(t.rt, body)
            self._guard(user, t, body, self.store.get(key, t.namespace, t.name))
            stored = views.from_view(t.rt, body, self.store.bucket(key).rt.api_version)
            manager = field_manager(request) if t.subresource is None else None
            replaced = self.store.replace(
                key, t.namespace, t.name, stored, t.subresource, updater=manager
            )
            return json_response(self._out(t.rt, replaced))
        if method == "PATCH" and media_type(request) == APPLY:
            obj, created = self._apply(request, t, await applied_body(request), user)
            return json_response(self._out(t.rt, obj), 201 if created else 200)
        if method == "PATCH":
            patch = await json_body(request)
            if self._guarded(t):
                current = self.store.get(key, t.namespace, t.name)
                content_type = request.headers.get("Content-Type", "")
                self._guard(user, t, apply_patch(content_type, current, patch), current)
            return json_response(self._out(t.rt, self._patch(request, t, patch)))
        if method == "DELETE" and t.subresource is None:
            options = await optional_object(request)
            propagation, grace = delete_options(request, options)
            obj = self.store.delete(
                key, t.namespace, t.name, propagation, grace, options.get("preconditions")
            )
            return json_response(self._out(t.rt, obj))
        raise method_not_allowed(f"{method} is not allowed here")

    def _patch(self, request: web.Request, t: Target, body: Any) -> Obj:
        assert t.name is not None
        content_type = request.headers.get("Content-Type", "")
        if views.is_identity(t.rt, self.store.bucket(t.rt.key).rt.api_version):
            manager = field_manager(request) if t.subresource is None else None
            return self.store.patch(
                t.rt.key, t.namespace, t.name, content_type, body, t.subresource, manager
            )
        current = views.to_view(t.rt, self.store.get(t.rt.key, t.namespace, t.name))
        patched = views.from_view(
            t.rt,
            apply_patch(content_type, current, body),
            self.store.bucket(t.rt.key).rt.api_version,
        )
        return self.store.replace(t.rt.key, t.namespace, t.name, patched, t.subresource)

    def _apply(
        self, request: web.Request, t: Target, body: Obj, user: UserInfo
    ) -> tuple[Obj, bool]:
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
        check_kind(t.rt, body)
        force = query_flag(request.query.get("force"))
        if self._guarded(t):
            current = self.store.try_get(t.rt.key, t.namespace, t.name)
            rt = self.store.bucket(t.rt.key).rt
            new = apply_config(current, body, manager, force, rt.api_version, rt.has_status)
            self._guard(user, t, new, current)
        return self.store.apply(t.rt.key, t.namespace, t.name, body, manager, force)

    def _guarded(self, t: Target) -> bool:
        return (
            self.authz is not None
            and t.subresource is None
            and escalation.guards(t.rt.group, t.rt.plural)
        )

    def _guard(self, user: UserInfo, t: Target, new: Obj, current: Obj | None = None) -> None:
        """kube-apiserver's policy-based RBAC storage: a Role, ClusterRole or binding grants
        no more than its writer holds (escalation.py)."""
        if self._guarded(t):
            assert self.authz is not None
            namespace = t.namespace or ""
            escalation.check_write(self.authz, user, t.rt.plural, namespace, new, current)

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
