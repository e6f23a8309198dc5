"""The emulator against the official Kubernetes client: CRUD, errors as the real server
answers them, selectors, watch with resume, status and scale subresources."""

from __future__ import annotations

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

pytestmark = pytest.mark.kubernetes


#: Pods of these tests name a scheduler that does not exist, so the emulator's scheduler and
#: kubelet leave them alone (Pending) and every change a watch sees is the test's own.
UNSCHEDULED = "testbed-tests-unscheduled"


def _pod(name: str, labels: dict[str, str] | None = None) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels=labels),
        spec=client.V1PodSpec(
            containers=[client.V1Container(name="c", image="busybox:1.36")],
            scheduler_name=UNSCHEDULED,
        ),
    )


def test_version_and_nodes(api: client.ApiClient) -> None:
    assert client.VersionApi(api).get_code().major == "1"
    nodes = client.CoreV1Api(api).list_node().items
    assert len(nodes) == 4
    node = nodes[0]
    assert node.status.allocatable["nvidia.com/gpu"] == "8"
    assert node.status.allocatable["nvidia.com/mig-1g.10gb"] == "7"
    assert node.metadata.labels["kubernetes.io/hostname"] == node.metadata.name
    assert [c.status for c in node.status.conditions if c.type == "Ready"] == ["True"]


def test_create_get_replace_delete(api: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(api)
    created = core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="cm"), data={"a": "1"})
    )
    assert created.metadata.uid
    assert created.metadata.creation_timestamp is not None
    first_rv = int(created.metadata.resource_version)
    got = core.read_namespaced_config_map("cm", namespace)
    got.data["b"] = "2"
    replaced = core.replace_namespaced_config_map("cm", namespace, got)
    assert replaced.data == {"a": "1", "b": "2"}
    assert int(replaced.metadata.resource_version) > first_rv
    assert replaced.metadata.uid == created.metadata.uid
    core.delete_namespaced_config_map("cm", namespace)
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_config_map("cm", namespace)
    assert gone.value.status == 404


def test_errors_are_status_objects(api: client.ApiClient, namespace: str) -> None:
    import json

    core = client.CoreV1Api(api)
    core.create_namespaced_pod(namespace, _pod("p"))
    with pytest.raises(ApiException) as exists:
        core.create_namespaced_pod(namespace, _pod("p"))
    body = json.loads(exists.value.body)
    assert (exists.value.status, body["reason"], body["details"]["name"]) == (
        409,
        "AlreadyExists",
        "p",
    )
    assert body["kind"] == "Status"
    assert body["details"]["kind"] == "pods"

    stale = core.read_namespaced_pod("p", namespace)
    core.patch_namespaced_pod("p", namespace, {"metadata": {"labels": {"x": "1"}}})
    with pytest.raises(ApiException) as conflict:
        core.replace_namespaced_pod("p", namespace, stale)
    assert (conflict.value.status, json.loads(conflict.value.body)["reason"]) == (409, "Conflict")

    with pytest.raises(ApiException) as invalid:
        core.create_namespaced_pod(namespace, _pod("Not_A_Name"))
    body = json.loads(invalid.value.body)
    assert (invalid.value.status, body["reason"]) == (422, "Invalid")
    assert body["details"]["causes"][0]["field"] == "metadata.name"

    with pytest.raises(ApiException) as missing_ns:
        core.create_namespaced_pod("no-such-namespace", _pod("p"))
    assert missing_ns.value.status == 404


def test_generate_name_and_selectors(api: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(api)
    for tier in ("a", "a", "b"):
        pod = _pod("", {"tier": tier, "run": "r1"})
        pod.metadata.name = None
        pod.metadata.generate_name = "gen-"
        made = core.create_namespaced_pod(namespace, pod)
        assert made.metadata.name.startswith("gen-")
        assert len(made.metadata.name) == 9
    core.create_namespaced_pod(namespace, _pod("other", {"tier": "c"}))

    def names(**kw: str) -> int:
        return len(core.list_namespaced_pod(namespace, **kw).items)

    assert names(label_selector="tier=a") == 2
    assert names(label_selector="tier!=a") == 2
    assert names(label_selector="tier in (a,b)") == 3
    assert names(label_selector="tier notin (a,b)") == 1
    assert names(label_selector="run") == 3
    assert names(label_selector="!run") == 1
    assert names(label_selector="run=r1,tier=b") == 1
    assert names(field_selector="metadata.name=other") == 1
    assert names(field_selector="status.phase=Pending") == 4
    assert names(field_selector="spec.nodeName=") == 4
    page = core.list_namespaced_pod(namespace, limit=3)
    assert len(page.items) == 3
    assert page.metadata._continue
    rest = core.list_namespaced_pod(namespace, limit=3, _continue=page.metadata._continue)
    assert len(rest.items) == 1
    assert not rest.metadata._continue


def test_watch_streams_and_resumes(api: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(api)
    start = core.list_namespaced_pod(namespace).metadata.resource_version
    core.create_namespaced_pod(namespace, _pod("w1", {"app": "w"}))
    core.patch_namespaced_pod("w1", namespace, {"metadata": {"labels": {"step": "2"}}})
    core.delete_namespaced_pod("w1", namespace)
    seen = [
        (event["type"], event["object"].metadata.name)
        for event in watch.Watch().stream(
            core.list_namespaced_pod, namespace, resource_version=start, timeout_seconds=1
        )
    ]
    assert seen == [("ADDED", "w1"), ("MODIFIED", "w1"), ("DELETED", "w1")]


def test_watch_selector_edges_and_gone(api: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(api)
    start = core.list_namespaced_pod(namespace).metadata.resource_version
    core.create_namespaced_pod(namespace, _pod("s1", {"keep": "no"}))
    core.patch_namespaced_pod("s1", namespace, {"metadata": {"labels": {"keep": "yes"}}})
    core.patch_namespaced_pod("s1", namespace, {"metadata": {"labels": {"keep": "no"}}})
    seen = [
        event["type"]
        for event in watch.Watch().stream(
            core.list_namespaced_pod,
            namespace,
            label_selector="keep=yes",
            resource_version=start,
            timeout_seconds=1,
        )
    ]
    assert seen == ["ADDED", "DELETED"]
    with pytest.raises(ApiException) as gone:
        for _ in watch.Watch().stream(
            core.list_namespaced_pod, namespace, resource_version="-5", timeout_seconds=1
        ):
            pass
    assert gone.value.status == 410


def test_status_and_scale_subresources(api: client.ApiClient, namespace: str) -> None:
    apps = client.AppsV1Api(api)
    labels = {"app": "d"}
    deployment = client.V1Deployment(
        metadata=client.V1ObjectMeta(name="d"),
        spec=client.V1DeploymentSpec(
            replicas=1,
            selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(
                    containers=[client.V1Container(name="c", image="x:1")],
                    scheduler_name=UNSCHEDULED,
                ),
            ),
        ),
    )
    made = apps.create_namespaced_deployment(namespace, deployment)
    assert made.metadata.generation == 1
    # The status is the deployment controller's: a write to the object does not change it.
    ignored = apps.patch_namespaced_deployment("d", namespace, {"status": {"readyReplicas": 9}})
    assert ignored.status is None or ignored.status.ready_replicas != 9
    assert ignored.metadata.generation == 1
    scale = apps.patch_namespaced_deployment_scale("d", namespace, {"spec": {"replicas": 3}})
    assert scale.spec.replicas == 3
    after = apps.read_namespaced_deployment("d", namespace)
    assert (after.spec.replicas, after.metadata.generation) == (3, 2)
