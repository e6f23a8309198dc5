"""Privilege-escalation prevention: kube-apiserver's policy-based storage of RBAC objects.

Being allowed to create Roles and RoleBindings is not being allowed to grant anything: a
Role (or ClusterRole) is written only when its author already holds every permission it
grants, or may ``escalate`` on it; a (Cluster)RoleBinding only when its author holds every
permission of the role it refers to, or may ``bind`` that role. ``system:masters`` may do
both. A refusal is kube-apiserver's own 403 (k8s.io/kubernetes pkg/registry/rbac:
``role/policybased``, ``rolebinding/policybased``, ``validation.ConfirmNoEscalation`` and
component-helpers' ``Covers``): ``roles.rbac.authorization.k8s.io "x" is forbidden: user
"u" (groups=["g"]) is attempting to grant RBAC permissions not currently held:`` and one
line per missing permission — for bindings too, with ``rolebindings…`` in front.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from kubemu.apiserver.authn import UserInfo
from kubemu.apiserver.rbac import RBAC, Attributes, Authorizer
from kubemu.storage.errors import ApiError

Obj = dict[str, Any]
ROLE_KINDS = frozenset({"roles", "clusterroles"})
BINDING_KINDS = frozenset({"rolebindings", "clusterrolebindings"})
#: What a ClusterRole's aggregationRule needs: it can gather anything (``* on *.*``).
FULL_AUTHORITY = [
    {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
    {"nonResourceURLs": ["*"], "verbs": ["*"]},
]
#: Fields a write may change without a check: the garbage collector's (IsOnlyMutatingGCFields).
_GC_FIELDS = ("ownerReferences", "finalizers", "managedFields", "resourceVersion")


def guards(group: str, plural: str) -> bool:
    """Whether writes of this resource are checked for escalation."""
    return group == RBAC and plural in ROLE_KINDS | BINDING_KINDS


def check_write(
    authz: Authorizer,
    user: UserInfo,
    plural: str,
    namespace: str,
    new: Obj,
    current: Obj | None = None,
) -> None:
    """Refuse (403) a create (``current`` None) or update of an RBAC object that would grant
    ``user`` more than it holds; an update that only touches GC fields passes."""
    if user.is_master:  # rbacregistry.EscalationAllowed
        return
    if current is not None and _only_gc_fields(new, current):
        return
    name = str((new.get("metadata") or {}).get("name") or "")
    if plural in ROLE_KINDS:
        # POST names no object: an `escalate` limited by resourceNames cannot allow a create
        asked = Attributes(user, "escalate", RBAC, plural, namespace=namespace,
                           name=name if current is not None else "")  # fmt: skip
        if authz.allowed(asked):
            return
        _confirm(authz, user, namespace, plural, name, list(new.get("rules") or []))
        aggregates = plural == "clusterroles" and new.get("aggregationRule")
        if aggregates and missing(authz.rules_for(user, namespace), FULL_AUTHORITY):
            raise _forbidden(
                plural, name, "must have cluster-admin privileges to use the aggregationRule"
            )
        return
    ref = new.get("roleRef") or {}
    if _bind_allowed(authz, user, ref, namespace):
        return
    _confirm(authz, user, namespace, plural, name, _referred_rules(authz, ref, namespace))


def _bind_allowed(authz: Authorizer, user: UserInfo, ref: Obj, namespace: str) -> bool:
    """rbacregistry.BindingAuthorized: ``bind`` on the referred role, in the binding's scope."""
    resource = {"ClusterRole": "clusterroles", "Role": "roles"}.get(str(ref.get("kind")))
    if resource is None:
        return False
    asked = Attributes(user, "bind", str(ref.get("apiGroup") or ""), resource,
                       namespace=namespace, name=str(ref.get("name") or ""))  # fmt: skip
    return authz.allowed(asked)


def _referred_rules(authz: Authorizer, ref: Obj, namespace: str) -> list[Obj]:
    kind, name = ref.get("kind"), str(ref.get("name") or "")
    if kind == "ClusterRole":
        role = authz.store.try_get(f"clusterroles.{RBAC}", None, name)
        plural = "clusterroles"
    else:
        role = authz.store.try_get(f"roles.{RBAC}", namespace, name) if namespace else None
        plural = "roles"
    if role is None:  # the registry's getter answers NotFound
        raise ApiError(
            404, "NotFound", f'{plural}.{RBAC} "{name}" not found',
            {"name": name, "group": RBAC, "kind": plural},
        )  # fmt: skip
    return list(role.get("rules") or [])


def _confirm(
    authz: Authorizer, user: UserInfo, namespace: str, plural: str, name: str, rules: list[Obj]
) -> None:
    """validation.ConfirmNoEscalation: every granted permission held, or a 403 naming each
    one that is not."""
    lacking = missing(authz.rules_for(user, namespace), rules)
    if not lacking:
        return
    lines = sorted({compact_string(rule) for rule in compact(lacking)})
    groups = "[" + " ".join(_quote(g) for g in user.groups) + "]"
    raise _forbidden(
        plural,
        name,
        f"user {_quote(user.name)} (groups={groups}) is attempting to grant RBAC permissions"
        " not currently held:\n" + "\n".join(lines),
    )


def _forbidden(plural: str, name: str, why: str) -> ApiError:
    """errors.NewForbidden(groupResource, name, err)."""
    subject = f'{plural}.{RBAC} "{name}"' if name else f"{plural}.{RBAC}"
    details: Obj = {"group": RBAC, "kind": plural}
    if name:
        details = {"name": name, **details}
    return ApiError(403, "Forbidden", f"{subject} is forbidden: {why}", details)


# -- component-helpers/auth/rbac/validation: Covers ----------------------------------------
def missing(owner: list[Obj], servant: Iterable[Obj]) -> list[Obj]:
    """The atomic rules of ``servant`` that no rule of ``owner`` covers (Covers)."""
    return [
        sub
        for rule in servant
        for sub in breakdown(rule)
        if not any(_rule_covers(own, sub) for own in owner)
    ]


def breakdown(rule: Obj) -> list[Obj]:
    """One rule per group × resource × verb (× resourceName), and per URL × verb."""
    subs: list[Obj] = []
    verbs = rule.get("verbs") or []
    names = rule.get("resourceNames") or []
    for group in rule.get("apiGroups") or []:
        for resource in rule.get("resources") or []:
            for verb in verbs:
                base = {"apiGroups": [group], "resources": [resource], "verbs": [verb]}
                subs += [{**base, "resourceNames": [n]} for n in names] if names else [base]
    for url in rule.get("nonResourceURLs") or []:
        subs += [{"nonResourceURLs": [url], "verbs": [verb]} for verb in verbs]
    return subs


def _rule_covers(owner: Obj, sub: Obj) -> bool:
    verbs, groups = owner.get("verbs") or [], owner.get("apiGroups") or []
    owned_names = owner.get("resourceNames") or []
    sub_names = sub.get("resourceNames") or []
    names_match = not owned_names or (bool(sub_names) and set(sub_names) <= set(owned_names))
    return (
        ("*" in verbs or set(sub.get("verbs") or []) <= set(verbs))
        and ("*" in groups or set(sub.get("apiGroups") or []) <= set(groups))
        and _resources_cover(owner.get("resources") or [], sub.get("resources") or [])
        and all(
            any(_url_covers(own, url) for own in owner.get("nonResourceURLs") or [])
            for url in sub.get("nonResourceURLs") or []
        )
        and names_match
    )


def _resources_cover(owned: list[str], wanted: list[str]) -> bool:
    if "*" in owned:
        return True
    for path in wanted:
        if path in owned:
            continue
        if "/" not in path or "*/" + path.split("/", 1)[1] not in owned:
            return False
    return True


def _url_covers(owner: str, path: str) -> bool:
    return owner == path or (owner.endswith("*") and path.startswith(owner.rstrip("*")))


# -- pkg/registry/rbac/validation: CompactRules, and rbac/v1 CompactString ------------------
def compact(rules: list[Obj]) -> list[Obj]:
    """Rules of one group, one resource and at most one name merged into one rule per
    (group, resource, name) with all their verbs, in the order they came."""
    simple: dict[tuple[str, str, str | None], Obj] = {}
    others: list[Obj] = []
    for rule in rules:
        names = rule.get("resourceNames") or []
        keys = set(rule) - {"apiGroups", "resources", "verbs", "resourceNames"}
        is_simple = (
            len(names) <= 1
            and not rule.get("nonResourceURLs")
            and len(rule.get("apiGroups") or []) == 1
            and len(rule.get("resources") or []) == 1
            and not keys
        )
        if not is_simple:
            others.append(rule)
            continue
        key = (rule["apiGroups"][0], rule["resources"][0], names[0] if names else None)
        if key in simple:
            have = simple[key]["verbs"]
            have += [v for v in rule.get("verbs") or [] if v not in have]
        else:
            simple[key] = {**rule, "verbs": list(rule.get("verbs") or [])}
    return [*others, *simple.values()]


def compact_string(rule: Obj) -> str:
    """``{APIGroups:["apps"], Resources:["deployments"], Verbs:["get" "list"]}``."""
    parts = [
        f"{label}:[{' '.join(_quote(v) for v in rule[field])}]"
        for label, field in (
            ("APIGroups", "apiGroups"),
            ("Resources", "resources"),
            ("NonResourceURLs", "nonResourceURLs"),
            ("ResourceNames", "resourceNames"),
            ("Verbs", "verbs"),
        )
        if rule.get(field)
    ]
    return "{" + ", ".join(parts) + "}"


def _quote(text: str) -> str:
    """Go's %q of a string (printable text stays as it is)."""
    return json.dumps(text, ensure_ascii=False)


def _only_gc_fields(new: Obj, current: Obj) -> bool:
    def stripped(obj: Obj) -> Obj:
        meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _GC_FIELDS}
        return {**obj, "metadata": meta}

    return stripped(new) == stripped(current)
