"""The runner's Role of every exportable example campaign, pinned rule by rule: a verb no
worker uses (``deletecollection`` on pods, ``list`` on Secrets, ``*``) or a rule too few fails
here. The expected rules are written out from what a worker does (docs/kubernetes.md), not
computed by the code under test; the emulator run of tests/execution/test_export_rbac.py
proves that each rule is needed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed.cli import main

ROOT = Path(__file__).resolve().parents[2]
#: What every run on a cluster reads and sweeps (its pods, their logs, a port-forward, the
#: cleanup's label LISTs, a failed start's events), as exported rules.
BASE = {
    ("", "configmaps"): ["list"],
    ("", "events"): ["list"],
    ("", "pods"): ["list", "watch", "delete"],
    ("", "pods/log"): ["get"],
    ("", "pods/portforward"): ["get"],
    ("", "services"): ["list"],
    ("apps", "deployments"): ["list"],
    ("apps", "replicasets"): ["get", "list"],
    ("batch", "jobs"): ["list"],
}
STACK = ["get", "create", "delete"]  # apply, read until gone, delete
READY = ["get", "list", "watch", "create", "delete"]  # … and watched until ready
EXPECTED: dict[str, dict[tuple[str, str], list[str]]] = {
    "tekton-sweep.yaml": {  # --set backend.kind=kubernetes: simulator Deployments
        **BASE,
        ("", "services"): ["list", "create", "delete"],
        ("apps", "deployments"): ["list", "create", "delete"],
    },
    "stack-helm.yaml": {
        **BASE,
        ("", "configmaps"): ["get", "list", "create", "delete"],
        ("", "serviceaccounts"): STACK,
        ("", "services"): ["get", "list", "create", "delete"],
        ("apps", "deployments"): ["get", "list", "watch", "create", "delete"],
    },
    "stack-kserve.yaml": {
        **BASE,
        ("", "services"): ["get", "list"],  # the InferenceService's URL is a Service
        ("serving.kserve.io", "inferenceservices"): READY,
    },
    "inference-scheduling.yaml": {
        **BASE,
        ("", "configmaps"): ["get", "list", "create", "delete"],
        ("", "pods"): ["get", "list", "watch", "delete"],  # the EPP's Role grants get
        ("", "serviceaccounts"): STACK,
        ("", "services"): ["get", "list", "create", "delete"],
        ("apps", "deployments"): READY,
        ("gateway.networking.k8s.io", "gateways"): READY,
        ("gateway.networking.k8s.io", "httproutes"): STACK,
        ("inference.networking.k8s.io", "inferencepools"): READY,  # and the EPP's list/watch
        ("rbac.authorization.k8s.io", "rolebindings"): STACK,
        ("rbac.authorization.k8s.io", "roles"): STACK,
    },
}
ARGS = {
    "tekton-sweep.yaml": ["--set", "backend.kind=kubernetes"],
    "inference-scheduling.yaml": ["--preset", "smoke"],
}


def exported(tmp_path: Path, example: str) -> dict[str, list[dict[str, Any]]]:
    out = tmp_path / "export"
    args = ["export", "tekton", str(ROOT / "examples" / example), *ARGS.get(example, [])]
    assert main([*args, "--upload", "s3://results/x", "--out", str(out)]) == 0
    return {p.name: list(yaml.safe_load_all(p.read_text())) for p in out.glob("*.yaml")}


@pytest.mark.parametrize("example", sorted(EXPECTED))
def test_the_runner_role_holds_exactly_what_the_workers_use(tmp_path: Path, example: str) -> None:
    files = exported(tmp_path, example)
    account, role, binding = files["rbac.yaml"]
    namespace = account["metadata"]["namespace"]
    assert (role["kind"], binding["kind"]) == ("Role", "RoleBinding")  # never cluster-wide
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == namespace
    rules = {(r["apiGroups"][0], r["resources"][0]): r["verbs"] for r in role["rules"]}
    assert all(len(r["apiGroups"]) == len(r["resources"]) == 1 for r in role["rules"])
    assert rules == EXPECTED[example]
    # the tasks' workers run where the Role holds
    (configmap,) = files["campaign.yaml"]
    assert yaml.safe_load(configmap["data"]["campaign.yaml"])["backend"]["namespace"] == namespace


def test_a_stacks_crds_are_the_admins_and_the_runner_never_gets_them(tmp_path: Path) -> None:
    files = exported(tmp_path, "inference-scheduling.yaml")
    admin = files["admin.yaml"]
    assert sorted(o["metadata"]["name"] for o in admin) == [
        "gatewayclasses.gateway.networking.k8s.io",
        "gateways.gateway.networking.k8s.io",
        "httproutes.gateway.networking.k8s.io",
        "inferencepools.inference.networking.k8s.io",
    ]
    assert {o["kind"] for o in admin} == {"CustomResourceDefinition"}
    # applied by the admin once, not by a run: no run's labels, no namespace
    assert not any("testbed.io/run" in (o["metadata"].get("labels") or {}) for o in admin)
    role = files["rbac.yaml"][1]
    assert not any("apiextensions.k8s.io" in r["apiGroups"] for r in role["rules"])
    assert "admin.yaml" not in exported(tmp_path / "helm", "stack-helm.yaml")


def test_secrets_are_reachable_only_by_name(tmp_path: Path) -> None:
    """A campaign whose workers need a Secret (a hub token) may create it and read, replace
    and delete it by name; LIST, WATCH or another Secret's name are not granted."""
    campaign = tmp_path / "c.yaml"
    campaign.write_text(
        yaml.safe_dump(
            {
                "name": "hf",
                "backend": {"kind": "kubernetes", "hf_token": "${env:HF_TOKEN}"},
                "deployments": [{"name": "sim", "server": "sim"}],
                "load": {
                    "profile": "concurrency",
                    "concurrency": 1,
                    "requests": 1,
                    "dataset": {"kind": "synthetic", "input_tokens": 4, "output_tokens": 2},
                },
            }
        )
    )
    out = tmp_path / "export"
    assert main(["export", "tekton", str(campaign), "--upload", "s3://r/x", "--out", str(out)]) == 0
    role = list(yaml.safe_load_all((out / "rbac.yaml").read_text()))[1]
    secrets = [r for r in role["rules"] if "secrets" in r["resources"]]
    assert secrets == [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "update", "delete"],
         "resourceNames": ["testbed-hf-token"]},
    ]  # fmt: skip


def test_datashim_patches_only_its_own_namespace(tmp_path: Path) -> None:
    """Datashim's label goes on the namespace the workers run in: ``patch`` on that one
    namespace by name (RBAC's resourceNames), never on every namespace of the cluster."""
    campaign = tmp_path / "c.yaml"
    campaign.write_text(
        yaml.safe_dump(
            {
                "name": "ds",
                "backend": {"kind": "kubernetes", "datashim": True, "namespace": "bench"},
                "deployments": [
                    {
                        "name": "ref",
                        "server": "hf",
                        "model": "s3://models/smollm2-135m",
                        "s3_endpoint_url": "http://minio:9000",
                    }
                ],
                "load": {
                    "profile": "concurrency",
                    "concurrency": 1,
                    "requests": 1,
                    "dataset": {"kind": "synthetic", "input_tokens": 4, "output_tokens": 2},
                },
            }
        )
    )
    out = tmp_path / "export"
    assert main(["export", "tekton", str(campaign), "--upload", "s3://r/x", "--out", str(out)]) == 0
    role = list(yaml.safe_load_all((out / "rbac.yaml").read_text()))[1]
    namespaces = [r for r in role["rules"] if "namespaces" in r["resources"]]
    assert namespaces == [
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["patch"],
         "resourceNames": ["bench"]},
    ]  # fmt: skip
