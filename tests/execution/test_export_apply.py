"""``testbed export tekton|argo`` applied to a cluster (the emulator): its namespace, RBAC,
campaign ConfigMap and Secret (placeholders filled as ``envsubst`` would), then the
PipelineRun or Workflow once the engine's CRD (tests/execution/crds) is registered — all
created and read back with the official client, unchanged."""

from __future__ import annotations

import base64
import contextlib
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import config, dynamic
from kubernetes.client import ApiClient
from kubernetes.dynamic.exceptions import ConflictError, ResourceNotFoundError

from testbed.cli import main

pytestmark = [pytest.mark.kubernetes]

ROOT = Path(__file__).resolve().parents[2]
CRDS = Path(__file__).resolve().parent / "crds"
MAIN_FILE = {"tekton": "pipelinerun.yaml", "argo": "workflow.yaml"}
CRD_FILE = {"tekton": "tekton-pipelinerun.yaml", "argo": "argo-workflow.yaml"}


@pytest.fixture
def client(cluster_kubeconfig: Path) -> Iterator[dynamic.DynamicClient]:
    api: ApiClient = config.new_client_from_config(str(cluster_kubeconfig))
    yield dynamic.DynamicClient(api)
    api.close()


def register_crd(client: dynamic.DynamicClient, path: Path) -> None:
    crd = yaml.safe_load(path.read_text())
    crds = client.resources.get(
        api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition"
    )
    with contextlib.suppress(ConflictError):  # the session's cluster has it already
        crds.create(body=crd)
    group, version = crd["spec"]["group"], crd["spec"]["versions"][0]["name"]
    kind = crd["spec"]["names"]["kind"]
    deadline = time.monotonic() + 10
    while True:  # discovery learns of a new CRD; the client caches, so ask it to look again
        try:
            client.resources.get(api_version=f"{group}/{version}", kind=kind)
            return
        except ResourceNotFoundError:
            assert time.monotonic() < deadline, f"{kind} never appeared in discovery"
            client.resources.invalidate_cache()
            time.sleep(0.1)


def envsubst(text: str, values: dict[str, str]) -> str:
    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda m: values[m.group(1)], text)


def apply_all(client: dynamic.DynamicClient, documents: list[dict[str, Any]]) -> list[Any]:
    created = []
    for doc in documents:
        resource = client.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
        namespace = doc["metadata"].get("namespace")
        created.append(resource.create(body=doc, namespace=namespace))
    return created


@pytest.mark.parametrize("engine", ["tekton", "argo"])
def test_the_exported_objects_apply_and_read_back(
    engine: str, tmp_path: Path, client: dynamic.DynamicClient
) -> None:
    namespace = f"export-{engine}"
    out = tmp_path / "export"
    code = main(
        [
            "export",
            engine,
            str(ROOT / "examples" / "tekton-sweep.yaml"),
            "--set",
            "backend.kind=kubernetes",  # the tasks' workers run in the pipeline's namespace
            "--namespace",
            namespace,
            "--upload",
            "s3://results/sweep",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    register_crd(client, CRDS / CRD_FILE[engine])
    values = {"AWS_ACCESS_KEY_ID": "key-id", "AWS_SECRET_ACCESS_KEY": "not-a-real-secret"}
    support = [
        *yaml.safe_load_all((out / "namespace.yaml").read_text()),
        *yaml.safe_load_all((out / "rbac.yaml").read_text()),
        *yaml.safe_load_all((out / "campaign.yaml").read_text()),
        *yaml.safe_load_all(envsubst((out / "secret.yaml").read_text(), values)),
    ]
    (pipeline,) = yaml.safe_load_all((out / MAIN_FILE[engine]).read_text())
    assert [d["kind"] for d in support] == [
        "Namespace", "ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Secret",
    ]  # fmt: skip
    try:
        apply_all(client, support)
        (created,) = apply_all(client, [pipeline])
        name = created.metadata.name
        assert name.startswith(pipeline["metadata"]["generateName"])
        resource = client.resources.get(api_version=pipeline["apiVersion"], kind=pipeline["kind"])
        back = resource.get(name=name, namespace=namespace).to_dict()
        assert back["spec"] == json.loads(json.dumps(pipeline["spec"]))
        assert back["metadata"]["labels"] == pipeline["metadata"]["labels"]
        for doc in support[1:]:
            kind = client.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
            where = doc["metadata"].get("namespace")
            stored = kind.get(name=doc["metadata"]["name"], namespace=where).to_dict()
            if doc["kind"] == "Secret":
                decoded = {k: base64.b64decode(v).decode() for k, v in stored["data"].items()}
                assert decoded == values
            for field in ("rules", "roleRef", "subjects", "data"):
                if field in doc and doc["kind"] != "Secret":
                    assert stored[field] == doc[field], field
        listed = resource.get(namespace=namespace).to_dict()["items"]
        assert [i["metadata"]["name"] for i in listed] == [name]
    finally:
        namespaces = client.resources.get(api_version="v1", kind="Namespace")
        namespaces.delete(name=namespace)
        for doc in support:
            if doc["kind"].startswith("Cluster"):
                kind = client.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
                kind.delete(name=doc["metadata"]["name"])
