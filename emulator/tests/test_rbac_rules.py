"""The emulator's RBAC rule matching against answers written from kube-apiserver, not from
the emulator: each case states a rule, a request and what the real API server decides.

The expected answers come from kube-apiserver's documented behaviour — the RBAC page of the
Kubernetes docs ("Referring to resources", "Referring to subjects", RoleBinding vs
ClusterRoleBinding) and the PolicyRule API reference ("``*`` means all", "``*/foo``
represents the subresource 'foo' for all resources", "an empty set [of resourceNames] means
that everything is allowed") — as ``pkg/apis/rbac/v1/evaluation_helpers.go`` implements them:
a group, verb or resource matches by ``*`` or by equality only; ``pods`` does not cover
``pods/log``; ``pods/*`` is not a wildcard (it names a subresource called ``*``); a rule with
resourceNames never matches a request without a name (list, create). None of these answers
is taken from the emulator's own output: the emulator is what is under test.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubemu.apiserver.authn import UserInfo
from kubemu.apiserver.rbac import Attributes, Authorizer
from kubemu.storage.store import Store

RBAC = "rbac.authorization.k8s.io"
USER = UserInfo("alice", ("system:authenticated", "team-devs"))
SA_USER = UserInfo(
    "system:serviceaccount:team:runner",
    ("system:serviceaccounts", "system:serviceaccounts:team", "system:authenticated"),
)


def _store() -> Store:
    store = Store()
    for name in ("team", "other"):
        store.create("namespaces", {"metadata": {"name": name}})
    return store


def _cluster_grant(store: Store, rules: list[dict[str, Any]], subject: dict[str, Any]) -> None:
    store.create(f"clusterroles.{RBAC}", {"metadata": {"name": "granted"}, "rules": rules})
    store.create(
        f"clusterrolebindings.{RBAC}",
        {
            "metadata": {"name": "granted"},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "granted"},
            "subjects": [subject],
        },
    )


def _asks(verb: str, group: str, resource: str, sub: str = "", name: str = "") -> Attributes:
    return Attributes(USER, verb, group, resource, sub, "team", name)


GET_PODS = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}

#: (rule, request, what kube-apiserver answers, why)
RULES: list[tuple[dict[str, Any], Attributes, bool, str]] = [
    (GET_PODS, _asks("get", "", "pods"), True, "exact group, resource and verb"),
    (GET_PODS, _asks("get", "metrics.k8s.io", "pods"), False,
     "a rule for pods in the core group says nothing of pods in another group"),
    ({**GET_PODS, "apiGroups": ["apps"], "resources": ["deployments"]},
     _asks("get", "extensions", "deployments"), False, "deployments of apps only"),
    ({**GET_PODS, "apiGroups": ["*"]}, _asks("get", "metrics.k8s.io", "pods"), True,
     "apiGroups * means every group"),
    ({**GET_PODS, "apiGroups": []}, _asks("get", "", "pods"), False,
     "no apiGroups matches no group"),
    (GET_PODS, _asks("list", "", "pods"), False, "get does not grant list"),
    (GET_PODS, _asks("watch", "", "pods"), False, "get does not grant watch"),
    ({**GET_PODS, "verbs": ["*"]}, _asks("deletecollection", "", "pods"), True, "verbs * is all"),
    (GET_PODS, _asks("get", "", "pods", "log"), False, "pods does not cover pods/log"),
    ({**GET_PODS, "resources": ["pods/log"]}, _asks("get", "", "pods"), False,
     "pods/log does not cover pods"),
    ({**GET_PODS, "resources": ["pods/log"]}, _asks("get", "", "pods", "log"), True,
     "resource/subresource, exactly"),
    ({**GET_PODS, "resources": ["pods/log"]}, _asks("get", "", "pods", "exec"), False,
     "one subresource does not cover another"),
    ({**GET_PODS, "resources": ["*"]}, _asks("get", "", "pods", "exec"), True,
     "resources * covers subresources too"),
    ({**GET_PODS, "resources": ["*/scale"], "apiGroups": ["apps"]},
     _asks("get", "apps", "deployments", "scale"), True, "*/scale: that subresource of any"),
    ({**GET_PODS, "resources": ["*/scale"]}, _asks("get", "", "pods", "log"), False,
     "*/scale is not */log"),
    ({**GET_PODS, "resources": ["*/scale"], "apiGroups": ["apps"]},
     _asks("get", "apps", "deployments"), False, "*/scale is not the parent resource"),
    ({**GET_PODS, "resources": ["pods/*"]}, _asks("get", "", "pods", "exec"), False,
     "pods/* is no wildcard: it names a subresource called *"),
    ({**GET_PODS, "resourceNames": ["web"]}, _asks("get", "", "pods", name="web"), True,
     "the named object"),
    ({**GET_PODS, "resourceNames": ["web"]}, _asks("get", "", "pods", name="db"), False,
     "another name"),
    ({**GET_PODS, "verbs": ["list"], "resourceNames": ["web"]}, _asks("list", "", "pods"),
     False, "a list has no name: resourceNames never match it"),
    ({**GET_PODS, "verbs": ["create"], "resourceNames": ["web"]}, _asks("create", "", "pods"),
     False, "a create has no name either"),
    ({**GET_PODS, "resourceNames": []}, _asks("get", "", "pods", name="db"), True,
     "empty resourceNames: every name"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("rule", "request_", "allowed"),
    [pytest.param(r, a, ok, id=why) for r, a, ok, why in RULES],
)
def test_a_rule_grants_what_kube_apiserver_grants(
    rule: dict[str, Any], request_: Attributes, allowed: bool
) -> None:
    store = _store()
    _cluster_grant(store, [rule], {"kind": "User", "name": "alice", "apiGroup": RBAC})
    assert Authorizer(store).allowed(request_) is allowed


def _path(path: str, verb: str = "get") -> Attributes:
    return Attributes(USER, verb, path=path, resource_request=False)


@pytest.mark.parametrize(
    ("urls", "asked", "allowed"),
    [
        (["/metrics"], _path("/metrics"), True),
        (["/metrics"], _path("/metrics/cadvisor"), False),  # exact unless it ends in *
        (["/logs/*"], _path("/logs/kube.log"), True),
        (["/logs/*"], _path("/logsx"), False),
        (["*"], _path("/anything/at/all"), True),
        (["/metrics"], _path("/metrics", "post"), False),  # the verb still has to match
    ],
)
def test_non_resource_urls_match_as_kube_apiserver_matches_them(
    urls: list[str], asked: Attributes, allowed: bool
) -> None:
    store = _store()
    rule = {"nonResourceURLs": urls, "verbs": ["get"]}
    _cluster_grant(store, [rule], {"kind": "User", "name": "alice", "apiGroup": RBAC})
    assert Authorizer(store).allowed(asked) is allowed


def test_a_resource_rule_grants_no_path_and_a_path_rule_no_resource() -> None:
    store = _store()
    rules = [{"nonResourceURLs": ["*"], "verbs": ["*"]}]
    _cluster_grant(store, rules, {"kind": "User", "name": "alice", "apiGroup": RBAC})
    assert not Authorizer(store).allowed(_asks("get", "", "pods"))


@pytest.mark.parametrize(
    ("subject", "user", "allowed"),
    [
        ({"kind": "User", "name": "alice"}, USER, True),
        ({"kind": "User", "name": "Alice"}, USER, False),  # names match exactly
        ({"kind": "Group", "name": "team-devs"}, USER, True),
        ({"kind": "Group", "name": "alice"}, USER, False),  # a user is not a group
        ({"kind": "ServiceAccount", "name": "runner", "namespace": "team"}, SA_USER, True),
        ({"kind": "ServiceAccount", "name": "runner", "namespace": "other"}, SA_USER, False),
        ({"kind": "Group", "name": "system:serviceaccounts:team"}, SA_USER, True),
        ({"kind": "User", "name": "runner"}, SA_USER, False),
    ],
)
def test_a_binding_names_its_subjects_exactly(
    subject: dict[str, Any], user: UserInfo, allowed: bool
) -> None:
    store = _store()
    _cluster_grant(store, [GET_PODS], subject)
    asked = Attributes(user, "get", "", "pods", namespace="team")
    assert Authorizer(store).allowed(asked) is allowed


def _role_binding(store: Store, namespace: str, kind: str, subject: dict[str, Any]) -> None:
    store.create(
        f"rolebindings.{RBAC}",
        {
            "metadata": {"name": "rb"},
            "roleRef": {"apiGroup": RBAC, "kind": kind, "name": "reader"},
            "subjects": [subject],
        },
        namespace,
    )


def test_a_role_binding_grants_in_its_own_namespace_only() -> None:
    store = _store()
    store.create(f"clusterroles.{RBAC}", {"metadata": {"name": "reader"}, "rules": [GET_PODS]})
    _role_binding(store, "team", "ClusterRole", {"kind": "User", "name": "alice"})
    authorizer = Authorizer(store)
    assert authorizer.allowed(Attributes(USER, "get", "", "pods", namespace="team"))
    assert not authorizer.allowed(Attributes(USER, "get", "", "pods", namespace="other"))
    assert not authorizer.allowed(Attributes(USER, "get", "", "pods"))  # nor cluster-wide
    assert not authorizer.allowed(Attributes(USER, "get", "", "nodes"))


def test_a_role_binding_refers_to_a_role_of_its_own_namespace() -> None:
    store = _store()
    store.create(f"roles.{RBAC}", {"metadata": {"name": "reader"}, "rules": [GET_PODS]}, "other")
    _role_binding(store, "team", "Role", {"kind": "User", "name": "alice"})
    # the Role "reader" exists, but in "other": the binding in "team" grants nothing
    assert not Authorizer(store).allowed(Attributes(USER, "get", "", "pods", namespace="team"))
    _role_binding(store, "other", "Role", {"kind": "User", "name": "alice"})
    assert Authorizer(store).allowed(Attributes(USER, "get", "", "pods", namespace="other"))


def test_a_service_account_subject_defaults_to_the_bindings_namespace() -> None:
    store = _store()
    store.create(f"roles.{RBAC}", {"metadata": {"name": "reader"}, "rules": [GET_PODS]}, "team")
    _role_binding(store, "team", "Role", {"kind": "ServiceAccount", "name": "runner"})
    assert Authorizer(store).allowed(Attributes(SA_USER, "get", "", "pods", namespace="team"))
    # a ClusterRoleBinding has no namespace to default to: the subject names nobody
    cluster = _store()
    _cluster_grant(cluster, [GET_PODS], {"kind": "ServiceAccount", "name": "runner"})
    assert not Authorizer(cluster).allowed(Attributes(SA_USER, "get", "", "pods", namespace="team"))


def test_nothing_is_granted_without_a_binding() -> None:
    store = _store()
    store.create(f"clusterroles.{RBAC}", {"metadata": {"name": "r"}, "rules": [GET_PODS]})
    assert not Authorizer(store).allowed(Attributes(USER, "get", "", "pods", namespace="team"))
    masters = UserInfo("root", ("system:masters",))
    assert Authorizer(store).allowed(Attributes(masters, "delete", "", "nodes"))
