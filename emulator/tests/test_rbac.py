"""The emulator's authentication and RBAC, spoken to over HTTPS: ServiceAccount tokens from the
TokenRequest API and from token Secrets, rules evaluated per request (verbs, groups,
subresources, resourceNames, namespaces, subjects), the API server's 403 Status word for word,
self reviews, and ``rbac=False`` letting everyone through."""

from __future__ import annotations

import base64
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kubemu import ClusterShape, Emulator
from test_emulator_inprocess import Client, _session

pytestmark = pytest.mark.kubernetes
RBAC = "rbac.authorization.k8s.io"
SA_USER = "system:serviceaccount:team:runner"


@contextlib.asynccontextmanager
async def cluster() -> AsyncIterator[Emulator]:
    emulator = Emulator(ClusterShape(nodes=1))
    await emulator.start()
    emulator.store.create("namespaces", {"metadata": {"name": "team"}})
    emulator.store.create("namespaces", {"metadata": {"name": "other"}})
    emulator.store.create("serviceaccounts", {"metadata": {"name": "runner"}}, "team")
    try:
        yield emulator
    finally:
        await emulator.stop()


async def _token(emulator: Emulator) -> str:
    async with _session(emulator, emulator.token) as session:
        code, answer = await Client(emulator, session).json(
            "POST", "/api/v1/namespaces/team/serviceaccounts/runner/token", {"spec": {}}
        )
    assert code == 201, answer
    assert answer["kind"] == "TokenRequest"
    token: str = answer["status"]["token"]
    return token


def _grant(emulator: Emulator, rules: list[dict[str, Any]], cluster: bool = False) -> None:
    ref = {"apiGroup": RBAC, "kind": "ClusterRole" if cluster else "Role", "name": "r"}
    if cluster:
        emulator.store.create(f"clusterroles.{RBAC}", {"metadata": {"name": "r"}, "rules": rules})
    else:
        emulator.store.create(f"roles.{RBAC}", {"metadata": {"name": "r"}, "rules": rules}, "team")
    subject = {"kind": "ServiceAccount", "name": "runner", "namespace": "team"}
    emulator.store.create(
        f"rolebindings.{RBAC}",
        {"metadata": {"name": "rb"}, "roleRef": ref, "subjects": [subject]},
        "team",
    )


async def _a_service_account_gets_exactly_what_its_role_grants(emu: Emulator) -> None:
    token = await _token(emu)
    async with _session(emu, token) as session:
        api = Client(emu, session)
        code, status = await api.json("GET", "/api/v1/namespaces/team/pods")
        assert code == 403
        assert status["reason"] == "Forbidden"
        assert status["message"] == (
            f'pods is forbidden: User "{SA_USER}" cannot list resource "pods" in API group ""'
            ' in the namespace "team"'
        )
        assert status["details"] == {"group": "", "kind": "pods"}
        _grant(emu, [{"apiGroups": [""], "resources": ["pods", "pods/log"],
                      "verbs": ["get", "list"]},
                     {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"],
                      "resourceNames": ["web"]}])  # fmt: skip
        assert (await api.json("GET", "/api/v1/namespaces/team/pods"))[0] == 200
        code, status = await api.json("GET", "/api/v1/namespaces/other/pods")
        assert code == 403  # a RoleBinding grants in its own namespace only
        code, status = await api.json("POST", "/api/v1/namespaces/team/pods", {"metadata": {}})
        assert code == 403
        assert 'cannot create resource "pods"' in status["message"]
        code, status = await api.json("GET", "/api/v1/namespaces/team/pods/p/exec")
        assert code == 403
        assert 'pods "p" is forbidden' in status["message"]
        assert 'cannot get resource "pods/exec"' in status["message"]
        code, _ = await api.json("GET", "/apis/apps/v1/namespaces/team/deployments/web")
        assert code == 404  # allowed by name, and absent
        code, status = await api.json("GET", "/apis/apps/v1/namespaces/team/deployments/db")
        assert code == 403
        assert status["details"]["name"] == "db"
        code, status = await api.json("POST", "/api/v1/namespaces", {"metadata": {"name": "x"}})
        assert status["message"] == (
            f'namespaces is forbidden: User "{SA_USER}" cannot create resource "namespaces"'
            ' in API group "" at the cluster scope'
        )
        assert (await api.json("GET", "/apis/apps/v1"))[0] == 200  # discovery for everyone


async def _a_cluster_role_bound_in_a_namespace_and_group_subjects(emu: Emulator) -> None:
    token = await _token(emu)
    _grant(emu, [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["list"]}], cluster=True)
    emu.store.create(
        f"clusterrolebindings.{RBAC}",
        {"metadata": {"name": "nodes"},
         "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "node-reader"},
         "subjects": [{"kind": "Group", "name": "system:serviceaccounts:team"}]},
    )  # fmt: skip
    emu.store.create(
        f"clusterroles.{RBAC}",
        {"metadata": {"name": "node-reader"},
         "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]},
    )  # fmt: skip
    async with _session(emu, token) as session:
        api = Client(emu, session)
        assert (await api.json("GET", "/apis/apps/v1/namespaces/team/deployments"))[0] == 200
        assert (await api.json("GET", "/apis/apps/v1/namespaces/other/deployments"))[0] == 403
        assert (await api.json("GET", "/api/v1/nodes"))[0] == 200
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                  "spec": {"resourceAttributes": {"verb": "list", "resource": "secrets",
                                                  "namespace": "team"}}}  # fmt: skip
        code, answer = await api.json(
            "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review
        )
        assert code == 201
        assert answer["status"]["allowed"] is True
        review["spec"]["resourceAttributes"]["verb"] = "delete"
        code, answer = await api.json(
            "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review
        )
        assert answer["status"]["allowed"] is False
        code, answer = await api.json(
            "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", {}
        )
        assert answer["status"]["userInfo"]["username"] == SA_USER


async def _token_secrets_and_the_life_of_a_token(emu: Emulator) -> None:
    async with _session(emu, emu.token) as session:
        admin = Client(emu, session)
        code, secret = await admin.json(
            "POST", "/api/v1/namespaces/team/secrets",
            {"metadata": {"name": "runner-token",
                          "annotations": {"kubernetes.io/service-account.name": "runner"}},
             "type": "kubernetes.io/service-account-token"},
        )  # fmt: skip
    assert code == 201
    assert set(secret["data"]) == {"token", "ca.crt", "namespace"}
    legacy = base64.b64decode(secret["data"]["token"]).decode()
    bound = await _token(emu)
    for token in (legacy, bound):
        async with _session(emu, token) as session:
            code, status = await Client(emu, session).json("GET", "/api/v1/namespaces/team/pods")
            assert code == 403
            assert SA_USER in status["message"]
    emu.store.delete("secrets", "team", "runner-token")
    async with _session(emu, legacy) as session:
        assert (await Client(emu, session).json("GET", "/api/v1/namespaces"))[0] == 401
    emu.store.delete("serviceaccounts", "team", "runner")
    emu.store.create("serviceaccounts", {"metadata": {"name": "runner"}}, "team")
    async with _session(emu, bound) as session:  # bound to the deleted one's uid
        assert (await Client(emu, session).json("GET", "/api/v1/namespaces"))[0] == 401
    async with _session(emu, bound[:-4] + "AAAA") as session:
        assert (await Client(emu, session).json("GET", "/api/v1/namespaces"))[0] == 401


async def test_without_rbac_every_authenticated_request_passes() -> None:
    emulator = Emulator(ClusterShape(nodes=1), rbac=False)
    await emulator.start()
    try:
        emulator.store.create("namespaces", {"metadata": {"name": "team"}})
        emulator.store.create("serviceaccounts", {"metadata": {"name": "runner"}}, "team")
        token = await _token(emulator)
        async with _session(emulator, token) as session:
            code, _ = await Client(emulator, session).json(
                "POST", "/api/v1/namespaces", {"metadata": {"name": "made"}}
            )
            assert code == 201
        async with _session(emulator, None) as session:
            assert (await Client(emulator, session).json("GET", "/api/v1/pods"))[0] == 401
    finally:
        await emulator.stop()


async def test_a_service_account_gets_exactly_what_its_role_grants() -> None:
    async with cluster() as emu:
        await _a_service_account_gets_exactly_what_its_role_grants(emu)


async def test_a_cluster_role_bound_in_a_namespace_and_group_subjects() -> None:
    async with cluster() as emu:
        await _a_cluster_role_bound_in_a_namespace_and_group_subjects(emu)


async def test_token_secrets_and_the_life_of_a_token() -> None:
    async with cluster() as emu:
        await _token_secrets_and_the_life_of_a_token(emu)
