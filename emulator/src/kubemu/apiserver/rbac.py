"""What a user may do: the RBAC authorizer of kube-apiserver, evaluated for every request.

A request becomes :class:`Attributes` (verb, API group, resource, subresource, name,
namespace) exactly as the API server's request-info does (``GET`` of a collection is
``list`` or ``watch``, ``DELETE`` of one is ``deletecollection``, a Namespace's own URL is
in that namespace), then the stored ClusterRoleBindings and the namespace's RoleBindings
whose subjects name the user grant it through their roles' rules (verbs, apiGroups,
resources with ``resource/subresource`` and ``*``, resourceNames, nonResourceURLs).
``system:masters`` may do everything; every authenticated user may read discovery and ask
what it may do (the ``system:discovery`` / ``system:basic-user`` defaults). A refusal is the
API server's 403 ``Status``, its message naming the permission that is missing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kubemu.apiserver.authn import UserInfo
from kubemu.storage.errors import ApiError
from kubemu.storage.store import Store

Obj = dict[str, Any]
RBAC = "rbac.authorization.k8s.io"
#: What every authenticated user holds (the system:basic-user, system:discovery and
#: system:public-info-viewer ClusterRoles a cluster binds to system:authenticated): asking
#: what it may do, and reading discovery. Rules like any bound ones, so that what a user may
#: grant (escalation.py) counts them too.
AUTHENTICATED_RULES: tuple[Obj, ...] = (
    {"apiGroups": ["authorization.k8s.io"],
     "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]},
    {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"],
     "verbs": ["create"]},
    {"nonResourceURLs": [url for p in ("/api", "/apis", "/openapi", "/version", "/healthz",
                                       "/livez", "/readyz") for url in (p, p + "/*")],
     "verbs": ["get"]},
)  # fmt: skip


@dataclass(frozen=True)
class Attributes:
    """One request, as the authorizer sees it."""

    user: UserInfo
    verb: str
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""
    resource_request: bool = True

    @property
    def qualified(self) -> str:
        return f"{self.resource}.{self.group}" if self.group else self.resource

    def permission(self) -> str:
        """``create pods`` / ``get pods/log`` / ``list namespaces`` …"""
        resource = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        return f"{self.verb} {resource}"


def verb_of(method: str, named: bool, watch: bool) -> str:
    """The RBAC verb of an HTTP method on one object (``named``) or a collection."""
    if method in ("GET", "HEAD"):
        return "get" if named else ("watch" if watch else "list")
    if method == "DELETE":
        return "delete" if named else "deletecollection"
    return {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, method.lower())


def forbidden_message(attrs: Attributes) -> str:
    """The API server's words (k8s.io/apiserver responsewriters.forbiddenMessage)."""
    user = attrs.user.name
    if not attrs.resource_request:
        return f'User "{user}" cannot {attrs.verb} path "{attrs.path}"'
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    what = f'User "{user}" cannot {attrs.verb} resource "{resource}" in API group "{attrs.group}"'
    if attrs.namespace:
        return f'{what} in the namespace "{attrs.namespace}"'
    return f"{what} at the cluster scope"


def forbidden(attrs: Attributes) -> ApiError:
    """The 403 Status (apimachinery errors.NewForbidden) for a refused request."""
    if not attrs.resource_request:
        return ApiError(403, "Forbidden", f"forbidden: {forbidden_message(attrs)}", {})
    subject = f'{attrs.qualified} "{attrs.name}"' if attrs.name else attrs.qualified
    details: Obj = {"group": attrs.group, "kind": attrs.resource}
    if attrs.name:
        details = {"name": attrs.name, **details}
    return ApiError(
        403, "Forbidden", f"{subject} is forbidden: {forbidden_message(attrs)}", details
    )


class Authorizer:
    """RBAC over the store's Roles, ClusterRoles and their bindings."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def allowed(self, attrs: Attributes) -> bool:
        user = attrs.user
        if user.is_master:
            return True
        return any(_rule_allows(rule, attrs) for rule in self.rules(user, attrs.namespace))

    def check(self, attrs: Attributes) -> None:
        if not self.allowed(attrs):
            raise forbidden(attrs)

    def rules(self, user: UserInfo, namespace: str) -> Iterator[Obj]:
        """Every rule granted to ``user`` for requests in ``namespace`` ('' = cluster scope)."""
        if "system:authenticated" in user.groups:
            yield from AUTHENTICATED_RULES
        bindings, _ = self.store.list(f"clusterrolebindings.{RBAC}", None)
        for binding in bindings:
            if _binds(binding, user):
                yield from self._role_rules(binding.get("roleRef") or {}, None)
        if not namespace:
            return
        bindings, _ = self.store.list(f"rolebindings.{RBAC}", namespace)
        for binding in bindings:
            if _binds(binding, user):
                yield from self._role_rules(binding.get("roleRef") or {}, namespace)

    def rules_for(self, user: UserInfo, namespace: str) -> list[Obj]:
        """The rules ``user`` holds in ``namespace``: what it may grant (RuleResolver.RulesFor)."""
        return list(self.rules(user, namespace))

    def _role_rules(self, ref: Obj, namespace: str | None) -> list[Obj]:
        kind = ref.get("kind")
        if kind == "ClusterRole":
            role = self.store.try_get(f"clusterroles.{RBAC}", None, ref.get("name", ""))
        elif kind == "Role" and namespace is not None:
            role = self.store.try_get(f"roles.{RBAC}", namespace, ref.get("name", ""))
        else:
            role = None
        return list((role or {}).get("rules") or [])


def _binds(binding: Obj, user: UserInfo) -> bool:
    for subject in binding.get("subjects") or []:
        kind, name = subject.get("kind"), subject.get("name")
        if kind == "User" and name == user.name:
            return True
        if kind == "Group" and name in user.groups:
            return True
        if kind == "ServiceAccount":
            namespace = subject.get("namespace") or binding["metadata"].get("namespace", "")
            if user.name == f"system:serviceaccount:{namespace}:{name}":
                return True
    return False


def _rule_allows(rule: Obj, attrs: Attributes) -> bool:
    verbs = rule.get("verbs") or []
    if "*" not in verbs and attrs.verb not in verbs:
        return False
    if not attrs.resource_request:
        return any(
            url == attrs.path or (url.endswith("*") and attrs.path.startswith(url[:-1]))
            for url in rule.get("nonResourceURLs") or []
        )
    groups = rule.get("apiGroups") or []
    if "*" not in groups and attrs.group not in groups:
        return False
    if not _resource_matches(rule.get("resources") or [], attrs):
        return False
    names = rule.get("resourceNames") or []
    return not names or attrs.name in names


def _resource_matches(resources: list[str], attrs: Attributes) -> bool:
    # as kube-apiserver's ResourceMatches: ``*``, the exact ``resource/subresource``, or
    # ``*/subresource``; ``pods/*`` is no wildcard (it names a subresource called ``*``)
    if attrs.subresource:
        wanted = f"{attrs.resource}/{attrs.subresource}"
        return any(r in ("*", wanted, f"*/{attrs.subresource}") for r in resources)
    return any(r in ("*", attrs.resource) for r in resources)
