"""The emulator's Store in-process: deletion and garbage collection, namespaces,
finalizers, patches, watches across selector edges and compaction, CRDs."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubemu import ApiError, Store
from kubemu.storage.patch import MERGE, STRATEGIC, apply_patch, json_patch

pytestmark = pytest.mark.kubernetes

LABELS = {"app": "x"}
TEMPLATE = {"metadata": {"labels": LABELS}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}}


def _owned(
    store: Store, key: str, name: str, owner: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    ref = {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "blockOwnerDeletion": True,
        "controller": True,
    }
    body: dict[str, Any] = {"metadata": {"name": name, "labels": LABELS, "ownerReferences": [ref]}}
    body.update(extra)
    return store.create(key, body, "default")


def _tree(store: Store) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    spec = {"selector": {"matchLabels": LABELS}, "template": TEMPLATE}
    deployment = store.create("deployments.apps", {"metadata": {"name": "d"}, "spec": spec})
    rs = _owned(store, "replicasets.apps", "d-1", deployment, spec=spec)
    pods = [_owned(store, "pods", f"d-1-{i}", rs, spec=TEMPLATE["spec"]) for i in range(3)]
    return deployment, rs, pods


def test_background_deletion_collects_the_tree() -> None:
    store = Store()
    _tree(store)
    store.delete("deployments.apps", "default", "d")
    assert store.count("replicasets.apps") == 0
    assert store.count("pods") == 0


def test_orphan_keeps_dependents_without_their_owner() -> None:
    store = Store()
    _, rs, _ = _tree(store)
    store.delete("replicasets.apps", "default", "d-1", propagation="Orphan")
    assert store.try_get("replicasets.apps", "default", "d-1") is None
    pods, _ = store.list("pods", "default")
    assert len(pods) == 3
    assert all("ownerReferences" not in p["metadata"] for p in pods)
    assert rs["metadata"]["uid"] not in str(pods)


async def test_foreground_waits_for_graceful_pods() -> None:
    store = Store()
    store.graceful_pods = True
    _, _, pods = _tree(store)
    for pod in pods:
        store.mutate(
            "pods", "default", pod["metadata"]["name"], lambda p: p["spec"].update(nodeName="n0")
        )
    marked = store.delete("deployments.apps", "default", "d", propagation="Foreground")
    assert marked["metadata"]["deletionTimestamp"]
    assert "foregroundDeletion" in marked["metadata"]["finalizers"]
    remaining, _ = store.list("pods", "default")
    assert len(remaining) == 3
    assert all(p["metadata"].get("deletionTimestamp") for p in remaining)
    for pod in remaining[:2]:
        store.delete("pods", "default", pod["metadata"]["name"], grace_period_s=0)
    assert store.try_get("deployments.apps", "default", "d") is not None
    store.delete("pods", "default", remaining[2]["metadata"]["name"], grace_period_s=0)
    assert store.try_get("replicasets.apps", "default", "d-1") is None
    assert store.try_get("deployments.apps", "default", "d") is None


def test_finalizers_hold_an_object_until_removed() -> None:
    store = Store()
    store.create("configmaps", {"metadata": {"name": "c", "finalizers": ["example.com/hold"]}})
    marked = store.delete("configmaps", "default", "c")
    assert marked["metadata"]["deletionTimestamp"]
    assert store.try_get("configmaps", "default", "c") is not None
    store.patch("configmaps", "default", "c", MERGE, {"metadata": {"finalizers": None}})
    assert store.try_get("configmaps", "default", "c") is None


def test_namespace_deletion_cascades_and_blocks_new_content() -> None:
    store = Store()
    store.create("namespaces", {"metadata": {"name": "run-1"}})
    store.create(
        "configmaps", {"metadata": {"name": "c", "finalizers": ["example.com/hold"]}}, "run-1"
    )
    store.create("secrets", {"metadata": {"name": "s"}, "stringData": {"k": "v"}}, "run-1")
    terminating = store.delete("namespaces", None, "run-1")
    assert terminating["status"]["phase"] == "Terminating"
    assert store.try_get("secrets", "run-1", "s") is None
    with pytest.raises(ApiError) as refused:
        store.create("configmaps", {"metadata": {"name": "late"}}, "run-1")
    assert refused.value.code == 403
    store.patch("configmaps", "run-1", "c", MERGE, {"metadata": {"finalizers": []}})
    assert store.try_get("namespaces", None, "run-1") is None
    with pytest.raises(ApiError) as protected:
        store.delete("namespaces", None, "default")
    assert protected.value.code == 403


def test_strategic_merge_patches_lists_by_key() -> None:
    pod = {
        "metadata": {"labels": {"a": "1"}, "finalizers": ["x"]},
        "spec": {
            "containers": [
                {"name": "a", "image": "a:1", "env": [{"name": "E", "value": "1"}]},
                {"name": "b", "image": "b:1"},
            ],
            "tolerations": [{"key": "t1"}],
        },
    }
    patch = {
        "metadata": {"labels": {"b": "2", "a": None}, "finalizers": ["y"]},
        "spec": {
            "containers": [
                {"name": "b", "image": "b:2"},
                {"name": "a", "env": [{"name": "F", "value": "2"}]},
                {"name": "c", "$patch": "delete"},
            ],
            "tolerations": [{"key": "t2"}],
        },
    }
    out = apply_patch(STRATEGIC, pod, patch)
    assert out["metadata"] == {"labels": {"b": "2"}, "finalizers": ["x", "y"]}
    assert [(c["name"], c["image"]) for c in out["spec"]["containers"]] == [
        ("a", "a:1"),
        ("b", "b:2"),
    ]
    assert out["spec"]["containers"][0]["env"] == [
        {"name": "E", "value": "1"},
        {"name": "F", "value": "2"},
    ]
    assert out["spec"]["tolerations"] == [{"key": "t2"}]
    assert pod["spec"]["containers"][1]["image"] == "b:1"  # the target is not modified
    deleted = apply_patch(
        STRATEGIC, out, {"spec": {"containers": [{"name": "a", "$patch": "delete"}]}}
    )
    assert [c["name"] for c in deleted["spec"]["containers"]] == ["b"]


def test_json_patch_operations() -> None:
    doc = {"spec": {"replicas": 1, "list": [1, 2]}, "metadata": {"labels": {"a/b": "x"}}}
    out = json_patch(
        doc,
        [
            {"op": "replace", "path": "/spec/replicas", "value": 3},
            {"op": "add", "path": "/spec/list/-", "value": 3},
            {"op": "remove", "path": "/metadata/labels/a~1b"},
            {"op": "test", "path": "/spec/list/0", "value": 1},
            {"op": "copy", "from": "/spec/replicas", "path": "/spec/copied"},
        ],
    )
    assert out == {
        "spec": {"replicas": 3, "list": [1, 2, 3], "copied": 3},
        "metadata": {"labels": {}},
    }
    with pytest.raises(ApiError) as failed:
        json_patch(doc, [{"op": "test", "path": "/spec/replicas", "value": 2}])
    assert failed.value.code == 422


async def test_watch_from_a_compacted_version_is_gone() -> None:
    store = Store(log_capacity=5)
    start = store.resource_version
    for i in range(10):
        store.create("configmaps", {"metadata": {"name": f"c{i}"}})
    with pytest.raises(ApiError) as gone:
        store.watch("configmaps", "default", str(start))
    assert gone.value.code == 410
    recent = store.watch("configmaps", "default", str(store.resource_version - 2))
    names = [(await recent.next(1.0)).object["metadata"]["name"] for _ in range(2)]  # type: ignore[union-attr]
    assert names == ["c8", "c9"]
    recent.close()


async def test_watch_without_version_lists_then_follows() -> None:
    store = Store()
    store.create("configmaps", {"metadata": {"name": "before"}})
    watch = store.watch("configmaps", "default")
    store.create("configmaps", {"metadata": {"name": "after"}})
    store.delete("configmaps", "default", "before")
    seen = []
    async for event in watch:
        seen.append((event.type, event.object["metadata"]["name"]))
        if len(seen) == 3:
            watch.close()
    assert seen == [("ADDED", "before"), ("ADDED", "after"), ("DELETED", "before")]
    await asyncio.sleep(0)


def test_crd_registers_its_type_and_deletion_drops_objects() -> None:
    store = Store()
    store.create("customresourcedefinitions.apiextensions.k8s.io", CRD)
    rt = store.registry.lookup("com.ie.ibm.hpsys", "v1alpha1", "datasets")
    assert rt is not None
    assert rt.namespaced
    assert rt.has_status
    made = store.create(
        "datasets.com.ie.ibm.hpsys", {"metadata": {"name": "ds"}, "spec": {"local": {}}}
    )
    assert made["apiVersion"] == "com.ie.ibm.hpsys/v1alpha1"
    assert made["kind"] == "Dataset"
    store.delete(
        "customresourcedefinitions.apiextensions.k8s.io", None, "datasets.com.ie.ibm.hpsys"
    )
    assert store.registry.lookup("com.ie.ibm.hpsys", "v1alpha1", "datasets") is None
    with pytest.raises(ApiError) as gone:
        store.get("datasets.com.ie.ibm.hpsys", "default", "ds")
    assert gone.value.code == 404


def test_crd_validation() -> None:
    store = Store()
    bad = {**CRD, "metadata": {"name": "wrong.name"}}
    with pytest.raises(ApiError) as refused:
        store.create("customresourcedefinitions.apiextensions.k8s.io", bad)
    assert refused.value.code == 422
    assert "spec.names.plural" in refused.value.message


CRD: dict[str, Any] = {
    "metadata": {"name": "datasets.com.ie.ibm.hpsys"},
    "spec": {
        "group": "com.ie.ibm.hpsys",
        "scope": "Namespaced",
        "names": {
            "kind": "Dataset",
            "plural": "datasets",
            "singular": "dataset",
            "shortNames": ["ds"],
        },
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Type", "type": "string", "jsonPath": ".spec.type"}
                ],
            }
        ],
    },
}


def test_every_namespace_gets_a_default_service_account() -> None:
    store = Store()
    store.create("namespaces", {"metadata": {"name": "fresh"}})
    assert store.get("serviceaccounts", "fresh", "default")["metadata"]["namespace"] == "fresh"
    assert store.try_get("serviceaccounts", "kube-system", "default") is not None


def test_an_object_created_for_a_deleted_owner_is_collected() -> None:
    store = Store()
    owner = store.create("configmaps", {"metadata": {"name": "owner"}})
    store.delete("configmaps", "default", "owner")
    ref = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": owner["metadata"]["uid"],
    }
    made = store.create("secrets", {"metadata": {"name": "late", "ownerReferences": [ref]}})
    assert made["metadata"]["name"] == "late"
    assert store.try_get("secrets", "default", "late") is None


def test_strategic_merge_of_service_ports_is_by_port() -> None:
    service = {"spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8000}]}}
    out = apply_patch(STRATEGIC, service, {"spec": {"ports": [{"port": 80, "targetPort": 9000}]}})
    assert out["spec"]["ports"] == [{"name": "http", "port": 80, "targetPort": 9000}]
