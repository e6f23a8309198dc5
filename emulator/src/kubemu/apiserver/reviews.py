"""Asking the server about oneself: ``kubectl auth can-i`` (SelfSubjectAccessReview),
``kubectl auth can-i --list`` (SelfSubjectRulesReview) and ``kubectl auth whoami``
(SelfSubjectReview) — created, answered, never stored, as on kube-apiserver."""

from __future__ import annotations

from typing import Any

from kubemu.apiserver.authn import UserInfo
from kubemu.apiserver.rbac import Attributes, Authorizer
from kubemu.storage.errors import bad_request

Obj = dict[str, Any]
ACCESS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
RULES = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"
WHOAMI = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
REVIEW_PATHS = frozenset({ACCESS, RULES, WHOAMI})


def review(authz: Authorizer | None, user: UserInfo, path: str, body: Obj) -> Obj:
    """The answered review object for a POST to one of :data:`REVIEW_PATHS`."""
    spec = body.get("spec") or {}
    answer: Obj = {"apiVersion": body.get("apiVersion"), "kind": body.get("kind"),
                   "metadata": {"creationTimestamp": None}}  # fmt: skip
    if path == WHOAMI:
        answer.update(apiVersion="authentication.k8s.io/v1", kind="SelfSubjectReview")
        answer["status"] = {"userInfo": user.as_dict()}
        return answer
    answer["apiVersion"] = "authorization.k8s.io/v1"
    if path == RULES:
        answer.update(kind="SelfSubjectRulesReview", spec=spec)
        answer["status"] = _rules_status(authz, user, spec.get("namespace") or "")
        return answer
    answer.update(kind="SelfSubjectAccessReview", spec=spec)
    attrs = _attributes(user, spec)
    allowed = authz is None or authz.allowed(attrs)
    status: Obj = {"allowed": allowed}
    if allowed and authz is not None and not user.is_master:
        status["reason"] = "RBAC: allowed by a binding of the user's roles"
    answer["status"] = status
    return answer


def _attributes(user: UserInfo, spec: Obj) -> Attributes:
    resource = spec.get("resourceAttributes")
    if resource:
        return Attributes(
            user,
            resource.get("verb", ""),
            resource.get("group", ""),
            resource.get("resource", ""),
            resource.get("subresource", ""),
            resource.get("namespace", ""),
            resource.get("name", ""),
        )
    other = spec.get("nonResourceAttributes")
    if other:
        return Attributes(user, other.get("verb", ""), path=other.get("path", ""),
                          resource_request=False)  # fmt: skip
    raise bad_request(
        "spec: Invalid value: exactly one of nonResourceAttributes or resourceAttributes"
        " must be specified"
    )


def _rules_status(authz: Authorizer | None, user: UserInfo, namespace: str) -> Obj:
    if authz is None or user.is_master:
        everything = {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}
        return {"resourceRules": [everything],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                "incomplete": False}  # fmt: skip
    resource_rules: list[Obj] = [
        {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
         "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]},
        {"verbs": ["create"], "apiGroups": ["authentication.k8s.io"],
         "resources": ["selfsubjectreviews"]},
    ]  # fmt: skip
    non_resource: list[Obj] = [
        {"verbs": ["get"], "nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*",
                                               "/openapi", "/openapi/*", "/version"]}
    ]  # fmt: skip
    for rule in authz.rules(user, namespace):
        if rule.get("nonResourceURLs"):
            non_resource.append(
                {"verbs": rule.get("verbs") or [], "nonResourceURLs": rule["nonResourceURLs"]}
            )
        else:
            kept = {k: rule[k] for k in ("verbs", "apiGroups", "resources", "resourceNames")
                    if rule.get(k)}  # fmt: skip
            resource_rules.append(kept)
    return {"resourceRules": resource_rules, "nonResourceRules": non_resource,
            "incomplete": False}  # fmt: skip
