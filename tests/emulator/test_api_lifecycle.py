"""The emulator through the official client: cascading deletion, deletecollection,
namespaces, events in both API groups, custom resources from a CRD."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

pytestmark = pytest.mark.kubernetes
LABELS = {"app": "x"}
#: A scheduler that does not exist: the emulator's controllers create pods for these
#: workloads but nothing schedules or runs them, so they are deleted at once.
UNSCHEDULED = "testbed-tests-unscheduled"


def _template() -> client.V1PodTemplateSpec:
    return client.V1PodTemplateSpec(
        metadata=client.V1ObjectMeta(labels=LABELS),
        spec=client.V1PodSpec(
            containers=[client.V1Container(name="c", image="x:1")], scheduler_name=UNSCHEDULED
        ),
    )


def _owner_ref(obj: object, kind: str, api_version: str) -> client.V1OwnerReference:
    meta = obj.metadata  # type: ignore[attr-defined]
    return client.V1OwnerReference(
        api_version=api_version,
        kind=kind,
        name=meta.name,
        uid=meta.uid,
        controller=True,
        block_owner_deletion=True,
    )


def test_deleting_a_deployment_collects_replicasets_and_pods(
    api: client.ApiClient, namespace: str
) -> None:
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    selector = client.V1LabelSelector(match_labels=LABELS)
    deployment = apps.create_namespaced_deployment(
        namespace,
        client.V1Deployment(
            metadata=client.V1ObjectMeta(name="d"),
            spec=client.V1DeploymentSpec(selector=selector, template=_template()),
        ),
    )
    rs = apps.create_namespaced_replica_set(
        namespace,
        client.V1ReplicaSet(
            metadata=client.V1ObjectMeta(
                name="d-1", owner_references=[_owner_ref(deployment, "Deployment", "apps/v1")]
            ),
            spec=client.V1ReplicaSetSpec(selector=selector, template=_template()),
        ),
    )
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(
            generate_name="d-1-",
            labels=LABELS,
            owner_references=[_owner_ref(rs, "ReplicaSet", "apps/v1")],
        ),
        spec=_template().spec,
    )
    for _ in range(2):
        core.create_namespaced_pod(namespace, pod)
    apps.delete_namespaced_deployment("d", namespace, propagation_policy="Background")
    assert apps.list_namespaced_replica_set(namespace).items == []
    assert core.list_namespaced_pod(namespace).items == []


def test_delete_collection_by_label(api: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(api)
    for name, run in (("a", "r1"), ("b", "r1"), ("c", "r2")):
        core.create_namespaced_config_map(
            namespace,
            client.V1ConfigMap(
                metadata=client.V1ObjectMeta(name=name, labels={"testbed.io/run": run})
            ),
        )
    owner = core.read_namespaced_config_map("a", namespace)
    core.create_namespaced_config_map(
        namespace,
        client.V1ConfigMap(
            metadata=client.V1ObjectMeta(
                name="dependent", owner_references=[_owner_ref(owner, "ConfigMap", "v1")]
            )
        ),
    )
    core.delete_collection_namespaced_config_map(
        namespace,
        label_selector="testbed.io/run=r1",
        body=client.V1DeleteOptions(propagation_policy="Orphan"),
    )
    left = core.list_namespaced_config_map(namespace).items
    assert [c.metadata.name for c in left] == ["c", "dependent"]
    assert left[1].metadata.owner_references is None


def test_namespace_deletion_removes_its_objects(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    name = f"t-{uuid.uuid4().hex[:8]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    core.create_namespaced_secret(
        name, client.V1Secret(metadata=client.V1ObjectMeta(name="s"), string_data={"k": "v"})
    )
    assert core.read_namespaced_secret("s", name).data == {"k": "dg=="}
    core.create_namespaced_service(
        name,
        client.V1Service(
            metadata=client.V1ObjectMeta(name="svc"),
            spec=client.V1ServiceSpec(selector=LABELS, ports=[client.V1ServicePort(port=80)]),
        ),
    )
    start = core.list_namespace().metadata.resource_version
    core.delete_namespace(name)
    events = [
        (e["type"], e["object"].metadata.name, e["object"].status.phase)
        for e in watch.Watch().stream(
            core.list_namespace, resource_version=start, timeout_seconds=1
        )
    ]
    assert ("MODIFIED", name, "Terminating") in events
    assert events[-1][:2] == ("DELETED", name)
    with pytest.raises(ApiException) as gone:
        core.read_namespace(name)
    assert gone.value.status == 404


def test_events_in_both_groups_are_one_storage(api: client.ApiClient, namespace: str) -> None:
    core, events = client.CoreV1Api(api), client.EventsV1Api(api)
    pod = core.create_namespaced_pod(
        namespace,
        client.V1Pod(
            metadata=client.V1ObjectMeta(name="p"),
            spec=_template().spec,
        ),
    )
    when = "2026-01-02T03:04:05.123456Z"
    events.create_namespaced_event(
        namespace,
        client.EventsV1Event(
            metadata=client.V1ObjectMeta(name="p.1"),
            event_time=when,
            reason="Scheduled",
            note="assigned to emu-node-0",
            type="Normal",
            action="Binding",
            reporting_controller="default-scheduler",
            reporting_instance="default-scheduler-emu",
            regarding=client.V1ObjectReference(
                kind="Pod", name="p", namespace=namespace, uid=pod.metadata.uid
            ),
        ),
    )
    selector = (
        f"involvedObject.name=p,involvedObject.namespace={namespace},"
        f"involvedObject.uid={pod.metadata.uid}"
    )
    seen = core.list_namespaced_event(namespace, field_selector=selector).items
    assert [(e.reason, e.message, e.source.component if e.source else None) for e in seen] == [
        ("Scheduled", "assigned to emu-node-0", None)
    ]
    raw = events.read_namespaced_event("p.1", namespace, _preload_content=False)
    body = json.loads(raw.data)
    assert body["eventTime"] == when  # microseconds kept
    assert body["regarding"]["name"] == "p"
    assert body["reportingController"] == "default-scheduler"


def test_custom_resources_from_a_crd(api: client.ApiClient, namespace: str) -> None:
    ext, custom = client.ApiextensionsV1Api(api), client.CustomObjectsApi(api)
    group, plural = f"g{uuid.uuid4().hex[:6]}.example.com", "widgets"
    ext.create_custom_resource_definition(
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {
                "group": group,
                "scope": "Namespaced",
                "names": {"kind": "Widget", "plural": plural, "singular": "widget"},
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "schema": {
                            "openAPIV3Schema": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            }
                        },
                        "subresources": {
                            "status": {},
                            "scale": {
                                "specReplicasPath": ".spec.size",
                                "statusReplicasPath": ".status.ready",
                                "labelSelectorPath": ".status.selector",
                            },
                        },
                    }
                ],
            },
        }
    )
    crd = ext.read_custom_resource_definition(f"{plural}.{group}")
    assert {c.type: c.status for c in crd.status.conditions}["Established"] == "True"
    groups = [g.name for g in client.ApisApi(api).get_api_versions().groups]
    assert group in groups
    start = str(
        custom.list_namespaced_custom_object(group, "v1", namespace, plural)["metadata"][
            "resourceVersion"
        ]
    )
    body = {
        "apiVersion": f"{group}/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {"size": 1},
    }
    custom.create_namespaced_custom_object(group, "v1", namespace, plural, body)
    custom.patch_namespaced_custom_object(
        group, "v1", namespace, plural, "w", {"spec": {"size": 2}}
    )
    custom.patch_namespaced_custom_object_status(
        group, "v1", namespace, plural, "w", {"status": {"ok": True}}
    )
    got = custom.get_namespaced_custom_object(group, "v1", namespace, plural, "w")
    assert (got["spec"], got["status"], got["metadata"]["generation"]) == (
        {"size": 2},
        {"ok": True},
        2,
    )
    custom.patch_namespaced_custom_object_status(
        group, "v1", namespace, plural, "w", {"status": {"ready": 2, "selector": "app=w"}}
    )
    scale = custom.patch_namespaced_custom_object_scale(
        group, "v1", namespace, plural, "w", {"spec": {"replicas": 5}}
    )
    assert (scale["spec"], scale["status"]) == (
        {"replicas": 5},
        {"replicas": 2, "selector": "app=w"},
    )
    got = custom.get_namespaced_custom_object(group, "v1", namespace, plural, "w")
    assert got["spec"] == {"size": 5}
    seen = [
        e["type"]
        for e in watch.Watch().stream(
            custom.list_namespaced_custom_object,
            group,
            "v1",
            namespace,
            plural,
            resource_version=start,
            timeout_seconds=1,
        )
    ]
    assert seen == ["ADDED", "MODIFIED", "MODIFIED", "MODIFIED", "MODIFIED"]
    ext.delete_custom_resource_definition(f"{plural}.{group}")
    with pytest.raises(ApiException) as gone:
        custom.get_namespaced_custom_object(group, "v1", namespace, plural, "w")
    assert gone.value.status == 404


def test_unauthenticated_requests_are_refused(api: client.ApiClient) -> None:
    import urllib3

    host = api.configuration.host
    pool = urllib3.PoolManager(cert_reqs="CERT_NONE")
    with pytest.warns(urllib3.exceptions.InsecureRequestWarning):
        response = pool.request(
            "GET", f"{host}/api/v1/namespaces", headers={"Authorization": "Bearer wrong"}
        )
    assert response.status == 401
    assert json.loads(response.data)["reason"] == "Unauthorized"


def test_watch_timeout_is_honoured(api: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(api)
    began = time.monotonic()
    assert list(watch.Watch().stream(core.list_namespaced_pod, namespace, timeout_seconds=1)) == []
    assert 0.9 <= time.monotonic() - began < 5.0


def test_foreground_and_orphan_propagation(api: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(api)

    def configmap(name: str, owner: object | None = None, **meta: object) -> client.V1ConfigMap:
        refs = [_owner_ref(owner, "ConfigMap", "v1")] if owner is not None else None
        return core.create_namespaced_config_map(
            namespace,
            client.V1ConfigMap(
                metadata=client.V1ObjectMeta(name=name, owner_references=refs, **meta)
            ),
        )

    owner = configmap("owner")
    configmap("held", owner, finalizers=["example.com/hold"])
    configmap("free", owner)
    core.delete_namespaced_config_map("owner", namespace, propagation_policy="Foreground")
    waiting = core.read_namespaced_config_map("owner", namespace)
    assert waiting.metadata.deletion_timestamp is not None
    assert waiting.metadata.finalizers == ["foregroundDeletion"]
    assert {c.metadata.name for c in core.list_namespaced_config_map(namespace).items} == {
        "owner",
        "held",
    }
    core.patch_namespaced_config_map("held", namespace, {"metadata": {"finalizers": None}})
    assert core.list_namespaced_config_map(namespace).items == []

    parent = configmap("parent")
    configmap("child", parent)
    core.delete_namespaced_config_map("parent", namespace, propagation_policy="Orphan")
    (child,) = core.list_namespaced_config_map(namespace).items
    assert child.metadata.name == "child"
    assert child.metadata.owner_references is None
