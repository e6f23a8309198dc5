"""Privilege escalation is refused as kube-apiserver refuses it: a ServiceAccount allowed to
write Roles and RoleBindings may grant only what it already holds, unless it may ``escalate``
(roles) or ``bind`` (bindings) — checked on create, update, patch and server-side apply. The
expected messages are kube-apiserver's (pkg/registry/rbac/validation ConfirmNoEscalation,
CompactString; the binding storage calls the same check), written out here, not derived."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from kubemu import Emulator
from test_emulator_inprocess import Client, _session
from test_rbac import RBAC, SA_USER, _token, cluster

pytestmark = pytest.mark.kubernetes
GROUPS = '(groups=["system:serviceaccounts" "system:serviceaccounts:team" "system:authenticated"])'
NOT_HELD = f'user "{SA_USER}" {GROUPS} is attempting to grant RBAC permissions not currently held:'
ROLES = f"/apis/{RBAC}/v1/namespaces/team/roles"
BINDINGS = f"/apis/{RBAC}/v1/namespaces/team/rolebindings"
WRITER = [  # may write Roles and RoleBindings in team, and read pods there: nothing else
    {"apiGroups": [RBAC], "resources": ["roles", "rolebindings"],
     "verbs": ["get", "create", "update", "patch"]},
    {"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"]},
]  # fmt: skip
EVERYTHING = [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]
SUBJECT = {"kind": "ServiceAccount", "name": "runner", "namespace": "team"}


def _give(emu: Emulator, rules: list[dict[str, Any]], name: str = "writer") -> None:
    emu.store.create(f"roles.{RBAC}", {"metadata": {"name": name}, "rules": rules}, "team")
    ref = {"apiGroup": RBAC, "kind": "Role", "name": name}
    body = {"metadata": {"name": name}, "roleRef": ref, "subjects": [SUBJECT]}
    emu.store.create(f"rolebindings.{RBAC}", body, "team")


def _role(name: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": f"{RBAC}/v1", "kind": "Role", "metadata": {"name": name}, "rules": rules}


def _binding(name: str, kind: str, role: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{RBAC}/v1",
        "kind": "RoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": RBAC, "kind": kind, "name": role},
        "subjects": [SUBJECT],
    }


async def _roles(emu: Emulator, api: Client) -> None:
    code, status = await api.json("POST", ROLES, _role("all", EVERYTHING))
    assert (code, status["reason"]) == (403, "Forbidden"), status
    assert status["message"] == (
        f'roles.{RBAC} "all" is forbidden: {NOT_HELD}\n'
        '{APIGroups:["*"], Resources:["*"], Verbs:["*"]}'
    )
    assert status["details"] == {"name": "all", "group": RBAC, "kind": "roles"}
    # one line per (group, resource, name) not held, its verbs gathered; held ones left out
    asked = [
        {"apiGroups": [""], "resources": ["pods", "secrets"], "verbs": ["get", "delete", "list"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["watch"], "resourceNames": ["s"]},
    ]
    code, status = await api.json("POST", ROLES, _role("some", asked))
    assert code == 403
    assert status["message"].split("\n")[1:] == [
        '{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}',
        '{APIGroups:[""], Resources:["secrets"], ResourceNames:["s"], Verbs:["watch"]}',
        '{APIGroups:[""], Resources:["secrets"], Verbs:["get" "delete" "list"]}',
    ]
    assert emu.store.try_get(f"roles.{RBAC}", "team", "some") is None
    # what it holds it may grant: a subset, by name, and a subresource
    held = [
        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"], "resourceNames": ["p"]},
    ]
    code, created = await api.json("POST", ROLES, _role("held", held))
    assert code == 201, created
    # an update, a merge patch and a server-side apply that add a permission: refused too
    created["rules"] = EVERYTHING
    code, status = await api.json("PUT", f"{ROLES}/held", created)
    assert (code, status["message"].split("\n")[0]) == (
        403,
        f'roles.{RBAC} "held" is forbidden: {NOT_HELD}',
    )
    patch = {"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["deletecollection"]}]}
    code, status = await api.json(
        "PATCH", f"{ROLES}/held", patch, **{"Content-Type": "application/merge-patch+json"}
    )
    assert code == 403
    assert status["message"].endswith(
        '{APIGroups:[""], Resources:["pods"], Verbs:["deletecollection"]}'
    )
    async with api.session.patch(
        api.url + f"{ROLES}/held?fieldManager=me&force=true",
        data=orjson.dumps(_role("held", EVERYTHING)),
        headers={"Content-Type": "application/apply-patch+yaml"},
    ) as resp:
        assert resp.status == 403, await resp.text()
    assert emu.store.get(f"roles.{RBAC}", "team", "held")["rules"] == held
    # labels only: the rules are the role's and still held, so the update passes
    created["rules"] = held
    created["metadata"]["labels"] = {"a": "b"}
    assert (await api.json("PUT", f"{ROLES}/held", created))[0] == 200


async def _bindings(emu: Emulator, api: Client) -> None:
    emu.store.create(f"clusterroles.{RBAC}", {"metadata": {"name": "cluster-admin"},
                                              "rules": EVERYTHING})  # fmt: skip
    code, status = await api.json(
        "POST", BINDINGS, _binding("admin", "ClusterRole", "cluster-admin")
    )
    assert code == 403, status
    assert status["message"] == (
        f'rolebindings.{RBAC} "admin" is forbidden: {NOT_HELD}\n'
        '{APIGroups:["*"], Resources:["*"], Verbs:["*"]}'
    )
    assert status["details"] == {"name": "admin", "group": RBAC, "kind": "rolebindings"}
    code, status = await api.json("POST", BINDINGS, _binding("ghost", "Role", "nothing"))
    assert (code, status["reason"]) == (404, "NotFound")
    # a role whose every permission the writer holds may be bound
    emu.store.create(f"roles.{RBAC}", _role("reader", [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]), "team")  # fmt: skip
    assert (await api.json("POST", BINDINGS, _binding("reader", "Role", "reader")))[0] == 201
    assert emu.store.try_get(f"rolebindings.{RBAC}", "team", "admin") is None
    # nor through a ClusterRoleBinding: no rights on those at all (authorization, first)
    code, status = await api.json(
        "POST",
        f"/apis/{RBAC}/v1/clusterrolebindings",
        _binding("admin", "ClusterRole", "cluster-admin"),
    )
    assert code == 403
    assert "cannot create resource" in status["message"]


async def _escalate_and_bind(emu: Emulator, api: Client) -> None:
    """With ``escalate`` on roles a Role may grant anything; with ``bind`` on one ClusterRole
    (by name) a binding to that ClusterRole passes, to another it does not (the wide Role is
    written, not bound: holding it would cover everything)."""
    _give(emu, [
        {"apiGroups": [RBAC], "resources": ["roles"], "verbs": ["escalate"]},
        {"apiGroups": [RBAC], "resources": ["clusterroles"], "verbs": ["bind"],
         "resourceNames": ["view"]},
    ], name="delegate")  # fmt: skip
    secrets = [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]  # not held
    for name, rules in (("view", secrets), ("edit", EVERYTHING)):
        emu.store.create(f"clusterroles.{RBAC}", {"metadata": {"name": name}, "rules": rules})
    assert (await api.json("POST", ROLES, _role("wide", EVERYTHING)))[0] == 201
    assert (await api.json("POST", BINDINGS, _binding("view", "ClusterRole", "view")))[0] == 201
    code, status = await api.json("POST", BINDINGS, _binding("edit", "ClusterRole", "edit"))
    assert code == 403
    assert NOT_HELD in status["message"]


async def test_a_role_writer_grants_only_what_it_holds() -> None:
    async with cluster() as emu:
        _give(emu, WRITER)
        async with _session(emu, await _token(emu)) as session:
            api = Client(emu, session)
            await _roles(emu, api)
            await _bindings(emu, api)
            await _escalate_and_bind(emu, api)
        # the cluster's admin (system:masters) is never checked
        async with _session(emu, emu.token) as session:
            admin = Client(emu, session)
            assert (await admin.json("POST", ROLES, _role("admin-made", EVERYTHING)))[0] == 201
