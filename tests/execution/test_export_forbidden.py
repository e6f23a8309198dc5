"""What an exported runner may NOT do, on a shared cluster: for every exportable example
campaign, its exported ServiceAccount, Role and RoleBinding (and ``admin.yaml``, by an
admin) are applied to the emulator with its RBAC on, and with a token of that
ServiceAccount each forbidden act is refused.

The expected answers are kube-apiserver's, written from its sources rather than read back
from the emulator: the authorization filter's 403 (``responsewriters.Forbidden``:
``<resource>[ "<name>"] is forbidden: User "<user>" cannot <verb> resource "<resource>[/<sub>]"
in API group "<group>" in the namespace "<ns>"`` or ``at the cluster scope``), and for a
runner that may create Roles and RoleBindings (a stack that ships them), the RBAC registry's
escalation check (``ConfirmNoEscalation``: ``user "<user>" (groups=[…]) is attempting to
grant RBAC permissions not currently held:`` and one line per permission). One emulator for
the module; each example in namespaces of its own."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config, dynamic
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from testbed.cli import main
from tests.execution.test_export_roles import ARGS, EXPECTED
from tests.fixtures.cluster import emulated_cluster

pytestmark = [pytest.mark.kubernetes, pytest.mark.security]

ROOT = Path(__file__).resolve().parents[2]
RBAC = "rbac.authorization.k8s.io"
#: A campaign whose runner may read one Secret by name (its hub token): the Secret rules
#: with ``resourceNames`` must not reach any other Secret.
HF_TOKEN: dict[str, Any] = {
    "name": "hf",
    "backend": {"kind": "kubernetes", "hf_token": "${env:HF_TOKEN}"},
    "deployments": [{"name": "sim", "server": "sim"}],
    "load": {"profile": "concurrency", "concurrency": 1, "requests": 1,
             "dataset": {"kind": "synthetic", "input_tokens": 4, "output_tokens": 2}},
}  # fmt: skip
CAMPAIGNS = [*sorted(EXPECTED), "hf-token"]
#: kube-apiserver's bootstrap ClusterRole every real cluster has.
CLUSTER_ADMIN = {
    "apiVersion": f"{RBAC}/v1", "kind": "ClusterRole", "metadata": {"name": "cluster-admin"},
    "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
              {"nonResourceURLs": ["*"], "verbs": ["*"]}],
}  # fmt: skip


@dataclass(frozen=True)
class Runner:
    """One example's exported runner on the cluster, and a bystander namespace."""

    api: ApiClient  # with the runner's token
    namespace: str  # where its Role holds
    account: str
    other: str  # a namespace the runner has no business in

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.account}"

    @property
    def groups(self) -> str:
        """The groups of a ServiceAccount's token, as Go's %q prints a []string."""
        names = ["system:serviceaccounts", f"system:serviceaccounts:{self.namespace}",
                 "system:authenticated"]  # fmt: skip
        return "[" + " ".join(json.dumps(n) for n in names) + "]"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with emulated_cluster(tmp_path_factory.mktemp("forbidden"), "--nodes", "1") as path:
        admin: ApiClient = config.new_client_from_config(str(path))
        try:
            apply(admin, [CLUSTER_ADMIN])
        finally:
            admin.close()
        yield path


def apply(api: ApiClient, docs: list[dict[str, Any]]) -> None:
    dyn = dynamic.DynamicClient(api)
    for doc in docs:
        resource = dyn.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
        resource.create(body=doc, namespace=doc["metadata"].get("namespace"))


def export(campaign: str, namespace: str, out: Path) -> dict[str, list[dict[str, Any]]]:
    if campaign == "hf-token":
        path = out.parent / "hf.yaml"
        path.write_text(yaml.safe_dump(HF_TOKEN))
        args = [str(path)]
    else:
        args = [str(ROOT / "examples" / campaign), *ARGS.get(campaign, [])]
    code = main(["export", "tekton", *args, "--namespace", namespace,
                 "--upload", "s3://results/x", "--out", str(out)])  # fmt: skip
    assert code == 0
    return {p.name: list(yaml.safe_load_all(p.read_text())) for p in out.glob("*.yaml")}


@pytest.fixture(scope="module")
def runners(cluster: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Runner]]:
    """Each campaign exported and applied as its admin would; the runner's token taken."""
    admin: ApiClient = config.new_client_from_config(str(cluster))
    made: dict[str, Runner] = {}
    try:
        for index, campaign in enumerate(CAMPAIGNS):
            namespace, other = f"forbidden-{index}", f"bystander-{index}"
            files = export(campaign, namespace, tmp_path_factory.mktemp(f"export-{index}") / "o")
            account = files["rbac.yaml"][0]["metadata"]["name"]
            apply(admin, [*files.get("admin.yaml", []), *files["namespace.yaml"],
                          *files["rbac.yaml"]])  # fmt: skip
            apply(admin, bystanders(namespace, other))
            request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec())
            answer = client.CoreV1Api(admin).create_namespaced_service_account_token(
                account, namespace, request
            )
            runner_api = config.new_client_from_config(str(cluster))
            runner_api.configuration.api_key = {"authorization": f"Bearer {answer.status.token}"}
            runner_api.configuration.cert_file = runner_api.configuration.key_file = None
            made[campaign] = Runner(runner_api, namespace, account, other)
        yield made
    finally:
        for runner in made.values():
            runner.api.close()
        admin.close()


def bystanders(namespace: str, other: str) -> list[dict[str, Any]]:
    """What the runner did not make: a Secret and a pod beside it, another ServiceAccount,
    and a namespace with its own pod."""
    pod = {"containers": [{"name": "c", "image": "registry.example/idle:1"}]}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "not-mine", "namespace":
         namespace}, "stringData": {"password": "hunter2"}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "not-mine", "namespace":
         namespace}, "spec": pod},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "theirs", "namespace": other},
         "spec": pod},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "bystander",
         "namespace": namespace}},
    ]  # fmt: skip


def _denied(r: Runner, verb: str, resource: str, group: str, scope: str | None, name: str) -> str:
    """responsewriters.Forbidden's message: NewForbidden(group resource, name, the reason)."""
    plural, _, _ = resource.partition("/")
    subject = f"{plural}.{group}" if group else plural
    subject += f' "{name}"' if name else ""
    where = f'in the namespace "{scope}"' if scope else "at the cluster scope"
    return (f'{subject} is forbidden: User "{r.user}" cannot {verb} resource "{resource}"'
            f' in API group "{group}" {where}')  # fmt: skip


def _escalation(r: Runner, plural: str, name: str, lines: list[str]) -> str:
    """ConfirmNoEscalation's message, under NewForbidden."""
    return (
        f'{plural}.{RBAC} "{name}" is forbidden: user "{r.user}" (groups={r.groups}) is'
        " attempting to grant RBAC permissions not currently held:\n" + "\n".join(lines)
    )


def _may_write_rbac(campaign: str) -> bool:
    """The runners that create Roles and RoleBindings (the stack ships them): their writes
    reach the registry's escalation check instead of the authorization filter's 403."""
    return (RBAC, "roles") in EXPECTED.get(campaign, {})


STAR = '{APIGroups:["*"], Resources:["*"], Verbs:["*"]}'
#: act → (method, path, body, expected message) for runner ``r`` of ``campaign``.
ACTS = {
    "get a Secret it did not create": lambda r, c: (
        "GET", f"/api/v1/namespaces/{r.namespace}/secrets/not-mine", None,
        _denied(r, "get", "secrets", "", r.namespace, "not-mine")),
    "list Secrets": lambda r, c: (
        "GET", f"/api/v1/namespaces/{r.namespace}/secrets", None,
        _denied(r, "list", "secrets", "", r.namespace, "")),
    "list pods in another namespace": lambda r, c: (
        "GET", f"/api/v1/namespaces/{r.other}/pods", None,
        _denied(r, "list", "pods", "", r.other, "")),
    "create a ClusterRole": lambda r, c: (
        "POST", f"/apis/{RBAC}/v1/clusterroles",
        {"metadata": {"name": "mine"}, "rules": [{"apiGroups": [""], "resources": ["pods"],
                                                  "verbs": ["get"]}]},
        _denied(r, "create", "clusterroles", RBAC, None, "")),
    "bind itself to cluster-admin in its namespace": lambda r, c: (
        "POST", f"/apis/{RBAC}/v1/namespaces/{r.namespace}/rolebindings",
        {"metadata": {"name": "root"}, "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole",
                                                   "name": "cluster-admin"},
         "subjects": [{"kind": "ServiceAccount", "name": r.account, "namespace": r.namespace}]},
        _escalation(r, "rolebindings", "root", [STAR, '{NonResourceURLs:["*"], Verbs:["*"]}'])
        if _may_write_rbac(c) else _denied(r, "create", "rolebindings", RBAC, r.namespace, "")),
    "bind itself to cluster-admin cluster-wide": lambda r, c: (
        "POST", f"/apis/{RBAC}/v1/clusterrolebindings",
        {"metadata": {"name": "root"}, "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole",
                                                   "name": "cluster-admin"},
         "subjects": [{"kind": "ServiceAccount", "name": r.account, "namespace": r.namespace}]},
        _denied(r, "create", "clusterrolebindings", RBAC, None, "")),
    "exec into a pod it did not create": lambda r, c: (
        "POST", f"/api/v1/namespaces/{r.namespace}/pods/not-mine/exec?command=id&stdout=true",
        None, _denied(r, "create", "pods/exec", "", r.namespace, "not-mine")),
    "delete a namespace it does not own": lambda r, c: (
        "DELETE", f"/api/v1/namespaces/{r.other}", None,
        _denied(r, "delete", "namespaces", "", r.other, r.other)),
    "create a token for another ServiceAccount": lambda r, c: (
        "POST", f"/api/v1/namespaces/{r.namespace}/serviceaccounts/bystander/token",
        {"spec": {}}, _denied(r, "create", "serviceaccounts/token", "", r.namespace, "bystander")),
    "escalate by writing a '*' Role": lambda r, c: (
        "POST", f"/apis/{RBAC}/v1/namespaces/{r.namespace}/roles",
        {"metadata": {"name": "everything"},
         "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]},
        _escalation(r, "roles", "everything", [STAR])
        if _may_write_rbac(c) else _denied(r, "create", "roles", RBAC, r.namespace, "")),
}  # fmt: skip


@pytest.mark.parametrize("act", sorted(ACTS))
@pytest.mark.parametrize("campaign", CAMPAIGNS)
def test_the_exported_runner_is_refused(
    runners: dict[str, Runner], campaign: str, act: str
) -> None:
    runner = runners[campaign]
    method, path, body, message = ACTS[act](runner, campaign)
    api = runner.api
    headers = {"Content-Type": "application/json", "Accept": "application/json",
               "Authorization": api.configuration.api_key["authorization"]}  # fmt: skip
    answer = api.call_api(method, api.configuration.host + path, headers, body)
    answer.read()
    status = json.loads(answer.data)
    assert (answer.status, status["reason"], status["code"]) == (403, "Forbidden", 403)
    assert status["message"] == message


def test_the_runner_that_may_write_roles_is_one_of_them(runners: dict[str, Runner]) -> None:
    """The escalation answers above are exercised: some example's runner does create Roles
    and RoleBindings (llm-d's EPP ships them), and may read its own Secret by name."""
    assert [c for c in CAMPAIGNS if _may_write_rbac(c)] == ["inference-scheduling.yaml"]
    runner = runners["hf-token"]
    core = client.CoreV1Api(runner.api)
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_secret("testbed-hf-token", runner.namespace)
    assert missing.value.status == 404  # allowed by name: the Secret is just not made yet
