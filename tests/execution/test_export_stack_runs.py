"""An exported stack campaign runs with nothing but its runner's rights: for each stack
example (the Helm chart's output, a KServe InferenceService, llm-d's inference scheduling)
and a chart that ships cluster-scoped objects, the export is applied as on a shared cluster
— ``admin.yaml`` by the admin, then the namespace, ServiceAccount, Role and RoleBinding —
and the first task's ``testbed worker`` command runs with a token of the exported
ServiceAccount against the emulator (RBAC on, with the KServe and gateway stand-ins). It
PASSes: the derived Role holds every verb the stack's worker uses, and the worker writes
none of the cluster-scoped objects the admin applied.

Each runs its smallest preset, cut further where its load alone would take a minute
(inference scheduling: 40 requests of the first treatment instead of 500 of three); the
full campaigns run in tests/backends/kubernetes as ``testbed run`` with an admin's rights."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client import ApiClient

from testbed.cli import main
from tests.execution.test_export_forbidden import apply
from tests.execution.test_export_rbac import run_worker
from tests.fixtures.cluster import emulated_cluster
from tests.verdicts import assert_passed

pytestmark = [pytest.mark.kubernetes, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
BUCKET = "stack-runs"
#: campaign → the export's flags (the smallest preset, and what cuts it further).
CASES = {
    "stack-helm.yaml": ["--preset", "smoke"],
    "stack-kserve.yaml": ["--preset", "smoke", "--set", "deployments.isvc.startup_timeout_s=90"],
    "inference-scheduling.yaml": ["--preset", "smoke", "--set", "load.requests=40"],
    "cluster-objects": [],
}
#: A chart's cluster-scoped objects beside its namespaced ones: the admin's, never the run's.
CLUSTER_OBJECTS = """
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: llm-sim-server-nodes}
rules: [{apiGroups: [""], resources: [nodes], verbs: [get, list]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: llm-sim-server-nodes}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: llm-sim-server-nodes}
subjects: [{kind: ServiceAccount, name: llm-sim-server, namespace: NAMESPACE}]
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: llm-sim-server-high}
value: 1000
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    work = tmp_path_factory.mktemp("stack-runs")
    flags = ("--kserve-stand-in", "--gateway-stand-in", "--nodes", "2")
    with emulated_cluster(work, *flags) as path:
        yield path


@pytest.fixture(scope="module")
def bucket(moto_s3: str) -> str:
    import boto3

    boto3.client(
        "s3", endpoint_url=moto_s3, aws_access_key_id="testing",
        aws_secret_access_key="testing", region_name="us-east-1",
    ).create_bucket(Bucket=BUCKET)  # fmt: skip
    return moto_s3


def cluster_objects_campaign(folder: Path, namespace: str) -> Path:
    """stack-helm.yaml over the chart's output plus a ClusterRole, its binding and a
    PriorityClass."""
    folder.mkdir(parents=True)
    chart = (ROOT / "examples" / "stacks" / "helm-sim" / "rendered.yaml").read_text()
    (folder / "chart.yaml").write_text(chart + CLUSTER_OBJECTS.replace("NAMESPACE", namespace))
    campaign = yaml.safe_load((ROOT / "examples" / "stack-helm.yaml").read_text())
    campaign["name"] = "cluster-objects"
    campaign["deployments"][0]["manifests"] = "chart.yaml"
    campaign.update({"matrix": None, "presets": {}})
    campaign["load"]["requests"] = 8
    path = folder / "campaign.yaml"
    path.write_text(yaml.safe_dump(campaign))
    return path


def materialize(export: Path, into: Path) -> Path:
    """The campaign volume as a task's pod mounts it at /campaign: each ConfigMap item at
    its path. Returns the campaign file."""
    (configmap,) = yaml.safe_load_all((export / "campaign.yaml").read_text())
    (run,) = yaml.safe_load_all((export / "pipelinerun.yaml").read_text())
    task = run["spec"]["pipelineSpec"]["tasks"][0]["taskSpec"]
    (volume,) = [v for v in task["volumes"] if "configMap" in v]
    for item in volume["configMap"]["items"]:
        target = into / item["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(configmap["data"][item["key"]])
    return into / "campaign.yaml"


def worker_command(export: Path, campaign: Path, results: Path) -> list[str]:
    """The first task's step, its mounts mapped to local paths."""
    import sys

    (run,) = yaml.safe_load_all((export / "pipelinerun.yaml").read_text())
    step = run["spec"]["pipelineSpec"]["tasks"][0]["taskSpec"]["steps"][0]
    args = [
        a.replace("/campaign/campaign.yaml", str(campaign))
        .replace("/results", str(results))
        .replace("$(context.pipelineRun.name)", "run-1")
        for a in step["args"]
    ]
    return [sys.executable, "-m", "testbed", *args]


def runner_kubeconfig(admin_path: Path, api: ApiClient, namespace: str, account: str,
                      out: Path) -> Path:  # fmt: skip
    """A kubeconfig of the same server with a token of ServiceAccount ``account``."""
    request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec())
    answer = client.CoreV1Api(api).create_namespaced_service_account_token(
        account, namespace, request
    )
    data = yaml.safe_load(admin_path.read_text())
    data["users"][0]["user"] = {"token": answer.status.token}
    out.write_text(yaml.safe_dump(data))
    return out


@pytest.mark.parametrize("case", list(CASES))
def test_an_exported_stack_task_passes_with_the_runners_token(
    tmp_path: Path, cluster: Path, bucket: str, case: str
) -> None:
    namespace = f"runner-{list(CASES).index(case)}"
    if case == "cluster-objects":
        source = cluster_objects_campaign(tmp_path / "source", namespace)
    else:
        source = ROOT / "examples" / case
    export = tmp_path / "export"
    code = main(["export", "tekton", str(source), *CASES[case], "--namespace", namespace,
                 "--upload", f"s3://{BUCKET}/runs", "--s3-endpoint-url", bucket,
                 "--out", str(export)])  # fmt: skip
    assert code == 0
    files = {p.name: list(yaml.safe_load_all(p.read_text())) for p in export.glob("*.yaml")}
    admin: ApiClient = config.new_client_from_config(str(cluster))
    try:
        apply(admin, [*files.get("admin.yaml", []), *files["namespace.yaml"],
                      *files["rbac.yaml"]])  # fmt: skip
        account = files["rbac.yaml"][0]["metadata"]["name"]
        token = runner_kubeconfig(cluster, admin, namespace, account, tmp_path / "runner.kube")
        campaign = materialize(export, tmp_path / "campaign")
        result = run_worker(worker_command(export, campaign, tmp_path / "out"), token, tmp_path)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        (summary,) = [
            json.loads(p.read_text()) for p in (tmp_path / "out").glob("*/*/summary.json")
        ]
        assert_passed(summary)
        if case == "cluster-objects":
            admin_kept(admin, files["admin.yaml"])
    finally:
        client.CoreV1Api(admin).delete_namespace(namespace)
        admin.close()


def admin_kept(admin: ApiClient, objects: list[dict[str, Any]]) -> None:
    """The admin's cluster-scoped objects are all there, as the admin applied them."""
    assert sorted(o["kind"] for o in objects) == [
        "ClusterRole", "ClusterRoleBinding", "PriorityClass",
    ]  # fmt: skip
    rbac = client.RbacAuthorizationV1Api(admin)
    found = [
        rbac.read_cluster_role("llm-sim-server-nodes"),
        rbac.read_cluster_role_binding("llm-sim-server-nodes"),
        client.SchedulingV1Api(admin).read_priority_class("llm-sim-server-high"),
    ]  # a 404 here: the run deleted what it did not make
    assert all("testbed.io/run" not in (o.metadata.labels or {}) for o in found)
