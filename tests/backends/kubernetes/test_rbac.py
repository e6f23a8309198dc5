"""``deploy/rbac.yaml`` against the emulator's RBAC: `testbed run` with a token of its
ServiceAccount (a run that makes its own namespace) PASSes and checks capacity against the
nodes; without the ClusterRole over namespaces it ERRORs (exit 3) with the API server's words
naming the permission."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config, dynamic
from kubernetes.client import ApiClient

from tests.backends.kubernetes.conftest import run_cli
from tests.backends.kubernetes.test_e2e import summaries, write_campaign
from tests.verdicts import assert_passed

pytestmark = [pytest.mark.kubernetes, pytest.mark.slow]

RBAC = Path(__file__).resolve().parents[3] / "deploy" / "rbac.yaml"


@pytest.fixture
def admin(cluster_kubeconfig: Path) -> Iterator[ApiClient]:
    api: ApiClient = config.new_client_from_config(str(cluster_kubeconfig))
    yield api
    api.close()


def _resource(api: ApiClient, doc: dict[str, Any]) -> Any:
    return dynamic.DynamicClient(api).resources.get(api_version=doc["apiVersion"], kind=doc["kind"])


@pytest.fixture
def deployed_rbac(admin: ApiClient) -> Iterator[list[dict[str, Any]]]:
    docs = list(yaml.safe_load_all(RBAC.read_text()))
    for doc in docs:
        _resource(admin, doc).create(body=doc, namespace=doc["metadata"].get("namespace"))
    yield docs
    for doc in reversed(docs):
        if doc["kind"] != "ServiceAccount":  # goes with its namespace
            _resource(admin, doc).delete(name=doc["metadata"]["name"])


def token_kubeconfig(admin_path: Path, api: ApiClient, out: Path) -> Path:
    request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[]))
    answer = client.CoreV1Api(api).create_namespaced_service_account_token(
        "testbed", "testbed-system", request
    )
    data = yaml.safe_load(admin_path.read_text())
    data["users"][0]["user"] = {"token": answer.status.token}
    out.write_text(yaml.safe_dump(data))
    return out


def test_deploy_rbac_is_enough_for_a_run_and_each_cluster_right_is_needed(
    tmp_path: Path, cluster_kubeconfig: Path, admin: ApiClient, deployed_rbac: list[Any]
) -> None:
    kubeconfig = token_kubeconfig(cluster_kubeconfig, admin, tmp_path / "sa.kubeconfig")
    campaign = write_campaign(tmp_path)
    run_dir = tmp_path / "rbac-pass"
    result = run_cli(["run", str(campaign), "--out", str(run_dir)], kubeconfig, tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (summary,) = summaries(run_dir)
    assert_passed(summary)
    assert "capacity not checked" not in result.stdout + result.stderr  # nodes list granted

    (cluster_binding,) = [d for d in deployed_rbac if d["metadata"]["name"] == "testbed-cluster"
                          and d["kind"] == "ClusterRoleBinding"]  # fmt: skip
    _resource(admin, cluster_binding).delete(name="testbed-cluster")
    try:
        denied = run_cli(
            ["run", str(campaign), "--out", str(tmp_path / "rbac-denied")], kubeconfig, tmp_path
        )
    finally:
        _resource(admin, cluster_binding).create(body=cluster_binding)
    text = " ".join((denied.stdout + denied.stderr).split())
    assert denied.returncode == 3, text[-3000:]
    # the run's first act, the cleanup of a previous attempt, deletes the run's namespace
    assert (
        'namespaces "testbed-rbac-denied" is forbidden: User'
        ' "system:serviceaccount:testbed-system:testbed" cannot delete resource "namespaces" in'
        ' API group "" in the namespace "testbed-rbac-denied"'
    ) in text
