"""Server-side apply against the emulator, with the official client and with kubectl 1.32:
apply creates, managedFields (fieldsV1) per manager, conflicts as 409 with the API
server's wording and causes, ``force`` takes fields over, fields a manager stops applying
are removed, fieldManager is required; ``kubectl apply --server-side -f`` of the rendered
manifests of an example (``testbed plan --manifests``), twice, then a conflicting manager.
Status bodies for 404/409/422 carry details as kube-apiserver writes them."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.emulator.test_kubectl import Kubectl

pytestmark = pytest.mark.kubernetes
APPLY = "application/apply-patch+yaml"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _apply(
    api: client.ApiClient, ns: str, data: dict[str, str] | None, manager: str, force: bool = False
) -> Any:
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}
    if data is not None:
        body["data"] = data
    return client.CoreV1Api(api).patch_namespaced_config_map(
        "cm", ns, body, field_manager=manager, force=force, _content_type=APPLY
    )


def _owners(api: client.ApiClient, ns: str) -> dict[str, Any]:
    cm = client.CoreV1Api(api).read_namespaced_config_map("cm", ns)
    return {e.manager: (e.operation, e.fields_v1) for e in cm.metadata.managed_fields or []}


def test_apply_creates_owns_conflicts_forces_and_removes(
    api: client.ApiClient, namespace: str
) -> None:
    created = _apply(api, namespace, {"a": "1", "b": "2"}, "alice")
    assert created.data == {"a": "1", "b": "2"}
    assert _owners(api, namespace) == {"alice": ("Apply", {"f:data": {"f:a": {}, "f:b": {}}})}
    version = created.metadata.resource_version
    again = _apply(api, namespace, {"a": "1", "b": "2"}, "alice")
    assert again.metadata.resource_version == version  # a no-op apply writes nothing
    # bob applies the same value of a (shared, no conflict) and a new c
    _apply(api, namespace, {"a": "1", "c": "3"}, "bob")
    # bob changes a, which alice owns: 409 as the API server words it
    with pytest.raises(ApiException) as err:
        _apply(api, namespace, {"a": "9", "c": "3"}, "bob")
    status = json.loads(err.value.body)
    assert err.value.status == 409
    assert status["reason"] == "Conflict"
    assert status["message"] == 'Apply failed with 1 conflict: conflict with "alice": .data.a'
    assert status["details"] == {
        "causes": [
            {
                "reason": "FieldManagerConflict",
                "message": 'conflict with "alice"',
                "field": ".data.a",
            }
        ]
    }
    forced = _apply(api, namespace, {"a": "9", "c": "3"}, "bob", force=True)
    assert forced.data == {"a": "9", "b": "2", "c": "3"}
    owners = _owners(api, namespace)
    assert owners["alice"] == ("Apply", {"f:data": {"f:b": {}}})
    assert owners["bob"] == ("Apply", {"f:data": {"f:a": {}, "f:c": {}}})
    # alice stops applying b: nobody else owns it, so it goes
    _apply(api, namespace, None, "alice")
    cm = client.CoreV1Api(api).read_namespaced_config_map("cm", namespace)
    assert cm.data == {"a": "9", "c": "3"}
    assert set(_owners(api, namespace)) == {"bob"}


def test_keyed_lists_merge_by_name_and_conflicts_name_the_item(
    api: client.ApiClient, namespace: str
) -> None:
    apps = client.AppsV1Api(api)

    def deployment(manager: str, containers: list[dict[str, Any]], **spec: Any) -> Any:
        body = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "d"},
            "spec": {
                "selector": {"matchLabels": {"app": "d"}},
                "template": {
                    "metadata": {"labels": {"app": "d"}},
                    "spec": {
                        "schedulerName": "testbed-tests-unscheduled",
                        "containers": containers,
                    },
                },
                **spec,
            },
        }
        return apps.patch_namespaced_deployment(
            "d", namespace, body, field_manager=manager, _content_type=APPLY
        )

    deployment("alice", [{"name": "a", "image": "img:1"}], replicas=0)
    both = deployment("bob", [{"name": "b", "image": "img:2"}])
    assert [c.name for c in both.spec.template.spec.containers] == ["a", "b"]
    fields = {e.manager: e.fields_v1 for e in both.metadata.managed_fields}
    item = fields["alice"]["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"a"}']
    assert item == {".": {}, "f:image": {}, "f:name": {}}
    assert fields["alice"]["f:spec"]["f:selector"] == {}  # a label selector is atomic
    with pytest.raises(ApiException) as err:
        deployment("bob", [{"name": "a", "image": "img:3"}], replicas=2)
    status = json.loads(err.value.body)
    assert status["message"] == (
        'Apply failed with 2 conflicts: conflicts with "alice":\n'
        '- .spec.replicas\n- .spec.template.spec.containers[name="a"].image'
    )


def test_field_manager_is_required_and_statuses_carry_details(
    api: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api)
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {}}
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_config_map("cm", namespace, body, _content_type=APPLY)
    assert err.value.status == 422
    assert json.loads(err.value.body) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value:'
        " is required for apply patch",
        "reason": "Invalid",
        "details": {
            "group": "meta.k8s.io",
            "kind": "PatchOptions",
            "causes": [
                {
                    "reason": "FieldValueRequired",
                    "message": "Required value: is required for apply patch",
                    "field": "fieldManager",
                }
            ],
        },
        "code": 422,
    }
    with pytest.raises(ApiException) as err:
        core.read_namespaced_config_map("nope", namespace)
    assert json.loads(err.value.body)["details"] == {"name": "nope", "kind": "configmaps"}
    apps = client.AppsV1Api(api)
    with pytest.raises(ApiException) as err:
        apps.read_namespaced_deployment("nope", namespace)
    assert json.loads(err.value.body)["details"] == {
        "name": "nope",
        "group": "apps",
        "kind": "deployments",
    }
    bad = {"metadata": {"name": "Bad_Name"}, "data": {}}
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(namespace, bad)
    status = json.loads(err.value.body)
    assert err.value.status == 422
    assert status["message"].startswith('ConfigMap "Bad_Name" is invalid: metadata.name:')
    (cause,) = status["details"]["causes"]
    assert cause["reason"] == "FieldValueInvalid"
    assert cause["field"] == "metadata.name"
    assert "group" not in status["details"]


def test_kubectl_server_side_apply_of_rendered_manifests(kubectl: Kubectl, tmp_path: Path) -> None:
    out = tmp_path / "manifests"
    subprocess.run(
        [
            *(sys.executable, "-m", "testbed", "plan", str(EXAMPLES / "sim-correctness.yaml")),
            *("--set", "backend.kind=kubernetes", "--manifests", str(out), "--run-id", "ssa"),
        ],
        check=True,
        capture_output=True,
    )
    files = sorted(out.glob("*.yaml"))
    namespace = json.loads(
        kubectl.out("create", "--dry-run=client", "-o", "json", "-f", str(files[0]))
    )
    ns = namespace["metadata"]["name"]
    try:
        first = kubectl.out("apply", "--server-side", "-f", str(out))
        assert first.count("serverside-applied") == len(files)
        second = kubectl.out("apply", "--server-side", "-f", str(out))  # unchanged
        assert second.count("serverside-applied") == len(files)
        deployment = next(f for f in files if "-deployment-" in f.name)
        name = deployment.name.split("-deployment-")[1].removesuffix(".yaml")
        managed = json.loads(
            kubectl.out("get", "deployment", name, "-n", ns, "-o", "json", "--show-managed-fields")
        )["metadata"]["managedFields"]
        assert [(m["manager"], m["operation"]) for m in managed] == [("kubectl", "Apply")]
        changed = deployment.read_text().replace("replicas: 1", "replicas: 2")
        assert changed != deployment.read_text()
        refused = kubectl.run(
            "apply", "--server-side", "--field-manager=other", "-f", "-", stdin=changed, ok=False
        )
        assert refused.returncode == 1
        assert 'conflict with "kubectl": .spec.replicas' in refused.stderr
        forced = kubectl.out(
            "apply",
            "--server-side",
            "--field-manager=other",
            "--force-conflicts",
            "-f",
            "-",
            stdin=changed,
        )
        assert "serverside-applied" in forced
        replicas = kubectl.out(
            "get", "deployment", name, "-n", ns, "-o", "jsonpath={.spec.replicas}"
        )
        assert replicas == "2"
    finally:
        kubectl.run("delete", "namespace", ns, "--wait=false", ok=False)


def test_other_writes_are_update_managers_an_apply_conflicts_with(
    api: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api)
    body = {"metadata": {"name": "cm"}, "data": {"a": "1", "b": "2"}}
    core.create_namespaced_config_map(namespace, body, field_manager="creator")
    core.patch_namespaced_config_map("cm", namespace, {"data": {"b": "3"}}, field_manager="editor")
    owners = _owners(api, namespace)
    assert owners == {
        "creator": ("Update", {"f:data": {"f:a": {}}}),
        "editor": ("Update", {"f:data": {"f:b": {}}}),
    }
    with pytest.raises(ApiException) as err:
        _apply(api, namespace, {"a": "9", "b": "3"}, "alice")
    assert json.loads(err.value.body)["message"] == (
        'Apply failed with 1 conflict: conflict with "creator" using v1: .data.a'
    )
    _apply(api, namespace, {"a": "9", "b": "3"}, "alice", force=True)
    owners = _owners(api, namespace)
    assert "creator" not in owners  # it owned only a, which alice took
    assert owners["alice"] == ("Apply", {"f:data": {"f:a": {}, "f:b": {}}})
    assert owners["editor"] == ("Update", {"f:data": {"f:b": {}}})  # same value: shared


def test_kubectl_client_side_apply_then_server_side(kubectl: Kubectl, tmp_path: Path) -> None:
    ns = f"ssa-{uuid.uuid4().hex[:8]}"
    kubectl.out("create", "namespace", ns)
    config_map = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {level: low}\n"
    try:
        kubectl.out("apply", "-n", ns, "-f", "-", stdin=config_map)
        changed = config_map.replace("low", "high")
        refused = kubectl.run(
            "apply", "--server-side", "-n", ns, "-f", "-", stdin=changed, ok=False
        )
        assert refused.returncode == 1
        assert (
            'Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using v1:'
            " .data.level" in refused.stderr
        )
        same = kubectl.out("apply", "--server-side", "-n", ns, "-f", "-", stdin=config_map)
        assert "serverside-applied" in same  # the same value: co-owned, no conflict
    finally:
        kubectl.run("delete", "namespace", ns, "--wait=false", ok=False)
