"""StatefulSets (apps/v1) on the emulator, read by the real kubectl and a watch: stable pod
names ``<set>-<ordinal>``, OrderedReady start (no pod before the one below it is Ready),
the controller's labels, hostname and subdomain, claims per pod, the status fields
``kubectl rollout status statefulset`` waits on, and a rolling update to a new revision."""

from __future__ import annotations

import json

import pytest
from kubernetes import client, watch

from tests.emulator.test_kubectl import Kubectl

pytestmark = pytest.mark.kubernetes

SET = """
apiVersion: v1
kind: Service
metadata: {name: db}
spec: {clusterIP: None, selector: {app: db}, ports: [{port: 80}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  replicas: 3
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: db, image: "example.com/db:1"}]
  volumeClaimTemplates:
    - metadata: {name: data}
      spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
"""


def _ready(pod: client.V1Pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def test_ordered_start_stable_names_and_rollout_status(
    api: client.ApiClient, kubectl: Kubectl, namespace: str
) -> None:
    core = client.CoreV1Api(api)
    start = core.list_namespaced_pod(namespace).metadata.resource_version
    kubectl.out("apply", "-n", namespace, "-f", "-", stdin=SET)
    said = kubectl.out("rollout", "status", "-n", namespace, "statefulset/db", "--timeout=60s")
    # the API defaults rollingUpdate.partition to 0, so kubectl says it this way
    assert "partitioned roll out complete: 3 new pods have been updated" in said
    # every pod, as a watch saw it: none was created before the one below it was Ready
    ready_seen: set[str] = set()
    stream = watch.Watch().stream(
        core.list_namespaced_pod, namespace, resource_version=start, timeout_seconds=5
    )
    for event in stream:
        pod = event["object"]
        name = pod.metadata.name
        if event["type"] == "ADDED":
            ordinal = int(name.rsplit("-", 1)[1])
            below = {f"db-{i}" for i in range(ordinal)}
            assert below <= ready_seen, f"{name} created before {below - ready_seen} was Ready"
        if _ready(pod):
            ready_seen.add(name)
        if ready_seen == {"db-0", "db-1", "db-2"}:
            break
    pods = {p.metadata.name: p for p in core.list_namespaced_pod(namespace).items}
    assert sorted(pods) == ["db-0", "db-1", "db-2"]
    one = pods["db-1"]
    assert (one.spec.hostname, one.spec.subdomain) == ("db-1", "db")
    assert one.metadata.labels["statefulset.kubernetes.io/pod-name"] == "db-1"
    assert one.metadata.labels["apps.kubernetes.io/pod-index"] == "1"
    assert one.metadata.owner_references[0].kind == "StatefulSet"
    claims = {
        v.persistent_volume_claim.claim_name for v in one.spec.volumes if v.persistent_volume_claim
    }
    assert claims == {"data-db-1"}
    status = json.loads(kubectl.out("get", "-n", namespace, "statefulset", "db", "-o", "json"))
    assert status["spec"]["podManagementPolicy"] == "OrderedReady"
    got = status["status"]
    assert (got["readyReplicas"], got["currentReplicas"], got["updatedReplicas"]) == (3, 3, 3)
    assert (
        got["currentRevision"]
        == got["updateRevision"]
        == one.metadata.labels["controller-revision-hash"]
    )
    assert got["observedGeneration"] == status["metadata"]["generation"]
    table = kubectl.out("get", "-n", namespace, "statefulsets")
    assert table.splitlines()[1].split()[:2] == ["db", "3/3"]


def test_a_new_template_rolls_every_pod_to_the_new_revision(
    kubectl: Kubectl, namespace: str
) -> None:
    kubectl.out(
        "apply", "-n", namespace, "-f", "-", stdin=SET.replace("replicas: 3", "replicas: 2")
    )
    kubectl.out("rollout", "status", "-n", namespace, "statefulset/db", "--timeout=60s")
    kubectl.out("set", "image", "-n", namespace, "statefulset/db", "db=example.com/db:2")
    said = kubectl.out("rollout", "status", "-n", namespace, "statefulset/db", "--timeout=60s")
    assert "roll out complete: 2 new pods have been updated" in said
    pods = json.loads(kubectl.out("get", "-n", namespace, "pods", "-o", "json"))["items"]
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    assert {p["spec"]["containers"][0]["image"] for p in live} == {"example.com/db:2"}
    assert sorted(p["metadata"]["name"] for p in live) == ["db-0", "db-1"]
