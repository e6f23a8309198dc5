"""Least privilege of an exported pipeline, proven against the emulator's RBAC: the exported
Tekton Role/RoleBinding applied, one task's ``testbed worker`` command run with a token of the
exported ServiceAccount (the TokenRequest API, as ``kubectl create token``) PASSes; with any
one rule removed it ERRORs (exit 3) naming the permission that rule granted — but for two
rules the test names rather than skips: ``get pods/log`` (without it the run still passes and
its server.log names the missing permission) and the diagnostic ``list events``, read only
when a pod fails to start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config, dynamic
from kubernetes.client import ApiClient

from testbed.backends.kubernetes.rbac import DIAGNOSTIC
from testbed.cli import main
from tests.verdicts import assert_passed

pytestmark = [pytest.mark.kubernetes, pytest.mark.slow]

SRC = Path(__file__).resolve().parents[2] / "src"
NAMESPACE = "rbac-tekton"
CAMPAIGN: dict[str, Any] = {
    "name": "rbac-sim",
    "backend": {"kind": "kubernetes", "namespace": NAMESPACE, "ready_timeout_s": 60},
    "deployments": [{"name": "sim", "server": "sim", "params": {"ttft_ms": 2, "itl_ms": 1}}],
    "load": {
        "profile": "concurrency",
        "concurrency": 2,
        "requests": 6,
        "dataset": {"kind": "synthetic", "input_tokens": 16, "output_tokens": 4},
        "slo": {"ttft_p99_ms": 5000},
    },
    "execution": {"retries": 0},
}


@pytest.fixture
def admin(cluster_kubeconfig: Path) -> Iterator[ApiClient]:
    api: ApiClient = config.new_client_from_config(str(cluster_kubeconfig))
    yield api
    api.close()


def apply(api: ApiClient, docs: list[dict[str, Any]]) -> None:
    dyn = dynamic.DynamicClient(api)
    for doc in docs:
        resource = dyn.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
        resource.create(body=doc, namespace=doc["metadata"].get("namespace"))


def token_kubeconfig(admin_path: Path, api: ApiClient, account: str, out: Path) -> Path:
    """A kubeconfig for the same server holding a token of ServiceAccount ``account``."""
    request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[]))
    answer = client.CoreV1Api(api).create_namespaced_service_account_token(
        account, NAMESPACE, request
    )
    data = yaml.safe_load(admin_path.read_text())
    data["users"][0]["user"] = {"token": answer.status.token}
    out.write_text(yaml.safe_dump(data))
    return out


def worker_command(export: Path, campaign: Path, results: Path) -> list[str]:
    """The first task's step of the exported PipelineRun, its mounts mapped to local paths."""
    (run,) = yaml.safe_load_all((export / "pipelinerun.yaml").read_text())
    step = run["spec"]["pipelineSpec"]["tasks"][0]["taskSpec"]["steps"][0]
    assert step["command"] == ["testbed"]
    args = [
        a.replace("/campaign/campaign.yaml", str(campaign))
        .replace("/results", str(results))
        .replace("$(context.pipelineRun.name)", "run-1")
        for a in step["args"]
    ]
    return [sys.executable, "-m", "testbed", *args]


def run_worker(command: list[str], kubeconfig: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        "PYTHONPATH": str(SRC),
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",  # moto's
    }
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def test_the_exported_role_is_exactly_what_a_task_needs(
    tmp_path: Path, cluster_kubeconfig: Path, admin: ApiClient, moto_s3: str
) -> None:
    import boto3

    boto3.client(
        "s3", endpoint_url=moto_s3, aws_access_key_id="testing",
        aws_secret_access_key="testing", region_name="us-east-1",
    ).create_bucket(Bucket="rbac-results")  # fmt: skip
    campaign = tmp_path / "campaign.yaml"
    campaign.write_text(yaml.safe_dump(CAMPAIGN))
    export = tmp_path / "export"
    code = main(
        ["export", "tekton", str(campaign), "--upload", "s3://rbac-results/runs",
         "--s3-endpoint-url", moto_s3, "--out", str(export)]
    )  # fmt: skip
    assert code == 0
    rbac = list(yaml.safe_load_all((export / "rbac.yaml").read_text()))
    assert [d["kind"] for d in rbac] == ["ServiceAccount", "Role", "RoleBinding"]
    role = rbac[1]
    rules = role["rules"]
    roles = dynamic.DynamicClient(admin).resources.get(
        api_version="rbac.authorization.k8s.io/v1", kind="Role"
    )
    apply(admin, [*yaml.safe_load_all((export / "namespace.yaml").read_text()), *rbac])
    try:
        sa_config = token_kubeconfig(cluster_kubeconfig, admin, rbac[0]["metadata"]["name"],
                                     tmp_path / "sa.kubeconfig")  # fmt: skip
        passed = run_worker(worker_command(export, campaign, tmp_path / "ok"), sa_config, tmp_path)
        assert passed.returncode == 0, passed.stdout[-3000:] + passed.stderr[-3000:]
        (summary,) = [json.loads(p.read_text()) for p in (tmp_path / "ok").glob("*/*/summary.json")]
        # every request was served with exactly these rules
        assert_passed(summary)
        assert summary["records"] == CAMPAIGN["load"]["requests"]

        unexercised, recorded = [], []
        for index, rule in enumerate(rules):
            reduced = {**role, "rules": rules[:index] + rules[index + 1 :]}
            roles.replace(body=reduced, name=role["metadata"]["name"], namespace=NAMESPACE)
            out = tmp_path / f"without-{index}"
            result = run_worker(worker_command(export, campaign, out), sa_config, tmp_path)
            named = [
                f'cannot {verb} resource "{resource}" in API group "{rule["apiGroups"][0]}"'
                for verb in rule["verbs"]
                for resource in rule["resources"]
            ]
            if result.returncode == 0:
                # a PASS without the rule: the denial must at least be on record (server.log)
                logs = " ".join(p.read_text() for p in out.rglob("server.log"))
                found = any(n in " ".join(logs.split()) for n in named)
                (recorded if found else unexercised).append(rule)
                continue
            reasons = [
                json.loads(p.read_text())["verdict"]["reason"] for p in out.glob("*/*/summary.json")
            ]  # the console's table wraps the reason; the treatment's summary holds it whole
            text = "\n".join([result.stdout, result.stderr, *reasons])
            assert result.returncode == 3, f"rule {rule}: exit {result.returncode}\n{text[-3000:]}"
            assert any(n in " ".join(text.split()) for n in named), (rule, text[-3000:])
        diagnostic = [
            {"apiGroups": [g], "resources": [r], "verbs": sorted(v)}
            for (g, r), v in DIAGNOSTIC.items()
        ]
        assert unexercised == diagnostic
        # the server's log is evidence, not a condition of the verdict: without the right the
        # run passes and its server.log says which permission it lacked
        assert recorded == [{"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]}]
    finally:
        client.CoreV1Api(admin).delete_namespace(NAMESPACE)
