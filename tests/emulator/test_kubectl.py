"""kubectl 1.32 against the emulator: discovery, Table output, describe with events,
apply/create -f (server-side field validation), scale, label, delete, ``get all -l``."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.kubernetes
KUBECTL = shutil.which("kubectl") or "kubectl"


class Kubectl:
    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig

    def run(
        self, *args: str, stdin: str | None = None, ok: bool = True
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [KUBECTL, "--kubeconfig", str(self.kubeconfig), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if ok:
            assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done

    def out(self, *args: str, stdin: str | None = None) -> str:
        return self.run(*args, stdin=stdin).stdout


@pytest.fixture
def namespace(kubectl: Kubectl) -> Iterator[str]:
    name = f"k-{uuid.uuid4().hex[:8]}"
    kubectl.out("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false", ok=False)


MANIFESTS = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {testbed.io/run: RUN}}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web, testbed.io/run: RUN}}
    spec:
      schedulerName: testbed-tests-unscheduled
      containers: [{name: server, image: "ghcr.io/example/server:1.0"}]
---
apiVersion: v1
kind: Service
metadata: {name: web, labels: {testbed.io/run: RUN}}
spec: {selector: {app: web}, ports: [{port: 8000}]}
---
apiVersion: v1
kind: Pod
metadata: {name: lone, labels: {testbed.io/run: RUN}}
spec: {schedulerName: testbed-tests-unscheduled, containers: [{name: c, image: "busybox:1.36"}]}
"""


def test_nodes_as_a_table(kubectl: Kubectl) -> None:
    lines = kubectl.out("get", "nodes").splitlines()
    assert lines[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert len(lines) == 5
    assert all(" Ready " in line for line in lines[1:])
    described = kubectl.out("describe", "node", "emu-node-0")
    assert "nvidia.com/gpu:" in described
    assert "nvidia.com/mig-1g.10gb:" in described
    assert "HolderIdentity:  emu-node-0" in described  # the node's Lease


def test_apply_get_all_by_label_and_delete(kubectl: Kubectl, namespace: str) -> None:
    run = f"r-{uuid.uuid4().hex[:6]}"
    manifests = MANIFESTS.replace("RUN", run)
    kubectl.out("apply", "-n", namespace, "-f", "-", stdin=manifests)
    kubectl.out("apply", "-n", namespace, "-f", "-", stdin=manifests)  # unchanged second time
    listed = kubectl.out("get", "all", "-A", "-l", f"testbed.io/run={run}")
    assert "pod/lone" in listed
    assert "service/web" in listed
    assert "deployment.apps/web" in listed
    header = next(line for line in listed.splitlines() if "READY" in line and "STATUS" in line)
    assert header.split()[:5] == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS"]
    kubectl.out("scale", "-n", namespace, "deployment/web", "--replicas=3")
    kubectl.out("label", "-n", namespace, "deployment/web", "tier=front")
    got = json.loads(kubectl.out("get", "-n", namespace, "deployment", "web", "-o", "json"))
    assert got["spec"]["replicas"] == 3
    assert got["metadata"]["labels"]["tier"] == "front"
    assert (
        kubectl.out("get", "-n", namespace, "deploy", "-l", "tier=front", "-o", "name")
        == "deployment.apps/web\n"
    )
    kubectl.out("delete", "-n", namespace, "-f", "-", stdin=manifests)
    assert kubectl.out("get", "all", "-A", "-l", f"testbed.io/run={run}").strip() == ""


def test_describe_pod_shows_its_events(kubectl: Kubectl, namespace: str) -> None:
    kubectl.out("apply", "-n", namespace, "-f", "-", stdin=MANIFESTS.replace("RUN", "x"))
    uid = kubectl.out("get", "-n", namespace, "pod", "lone", "-o", "jsonpath={.metadata.uid}")
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "lone.1"},
        "involvedObject": {
            "kind": "Pod",
            "name": "lone",
            "namespace": namespace,
            "uid": uid,
            "apiVersion": "v1",
        },
        "reason": "FailedScheduling",
        "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
        "type": "Warning",
        "source": {"component": "default-scheduler"},
        "count": 1,
    }
    kubectl.out("create", "-n", namespace, "-f", "-", stdin=json.dumps(event))
    described = kubectl.out("describe", "-n", namespace, "pod", "lone")
    assert f"Namespace:        {namespace}" in described
    assert "FailedScheduling" in described
    assert "Insufficient nvidia.com/gpu" in described
    events = kubectl.out("get", "-n", namespace, "events")
    assert "pod/lone" in events


def test_errors_read_as_from_a_real_server(kubectl: Kubectl, namespace: str) -> None:
    missing = kubectl.run("get", "-n", namespace, "pod", "nope", ok=False)
    assert missing.returncode == 1
    assert 'Error from server (NotFound): pods "nope" not found' in missing.stderr
    configmap = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})
    kubectl.out("create", "-n", namespace, "-f", "-", stdin=configmap)
    again = kubectl.run("create", "-n", namespace, "-f", "-", stdin=configmap, ok=False)
    expected = 'error when creating "STDIN": configmaps "c" already exists'
    assert f"Error from server (AlreadyExists): {expected}" in again.stderr
    unknown = kubectl.run("create", "-n", namespace, "quota", "q", "--hard=pods=1", ok=False)
    assert "the server could not find the requested resource" in unknown.stderr
    # a PriorityClass comes as protobuf from kubectl's typed command
    kubectl.out(
        "create", "priorityclass", f"{namespace}-p", "--value=7", "--preemption-policy=Never"
    )
    listed = json.loads(kubectl.out("get", "pc", f"{namespace}-p", "-o", "json"))
    assert (listed["value"], listed["preemptionPolicy"]) == (7, "Never")
    bad = kubectl.run(
        "create",
        "-n",
        namespace,
        "-f",
        "-",
        stdin='{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[]}}',
        ok=False,
    )
    assert "is invalid" in bad.stderr
    assert "spec.containers" in bad.stderr


def test_custom_resource_through_kubectl(kubectl: Kubectl, namespace: str) -> None:
    group = f"k{uuid.uuid4().hex[:6]}.example.com"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"gadgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {
                "kind": "Gadget",
                "plural": "gadgets",
                "singular": "gadget",
                "shortNames": ["gd"],
            },
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
                    "additionalPrinterColumns": [
                        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"}
                    ],
                }
            ],
        },
    }
    kubectl.out("apply", "-f", "-", stdin=json.dumps(crd))
    gadget = {
        "apiVersion": f"{group}/v1",
        "kind": "Gadget",
        "metadata": {"name": "g1"},
        "spec": {"size": 7},
    }
    kubectl.out("apply", "-n", namespace, "-f", "-", stdin=json.dumps(gadget))
    table = kubectl.out("get", "-n", namespace, f"gadgets.{group}").split()
    assert table == ["NAME", "SIZE", "g1", "7"]
    kubectl.out("delete", "crd", f"gadgets.{group}")


def test_imperative_commands_send_protobuf_that_is_decoded(
    kubectl: Kubectl, namespace: str
) -> None:
    n = ("-n", namespace)
    kubectl.out("create", *n, "configmap", "c", "--from-literal=a=1", "--from-literal=b=2")
    kubectl.out("create", *n, "secret", "generic", "s", "--from-literal=k=v")
    kubectl.out(
        "create", *n, "deployment", "web", "--image=nginx:1.25", "--replicas=0", "--port=80"
    )
    kubectl.out("create", *n, "job", "j", "--image=busybox:1.36", "--", "echo", "hi")
    kubectl.out(
        "run", *n, "p", "--image=busybox:1.36", "--labels=a=b", "--env=X=1", "--", "sleep", "1"
    )
    kubectl.out("expose", *n, "deployment", "web", "--port=80", "--target-port=8080")
    kubectl.out("create", *n, "serviceaccount", "sa")
    assert json.loads(kubectl.out("get", *n, "cm", "c", "-o", "jsonpath={.data}")) == {
        "a": "1",
        "b": "2",
    }
    assert kubectl.out("get", *n, "secret", "s", "-o", "jsonpath={.data.k}") == "dg=="
    deployment = json.loads(kubectl.out("get", *n, "deploy", "web", "-o", "json"))
    assert deployment["spec"]["replicas"] == 0  # a pointer field set to zero stays zero
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert (container["name"], container["image"]) == ("nginx", "nginx:1.25")
    assert container["ports"][0]["containerPort"] == 80
    job = json.loads(kubectl.out("get", *n, "job", "j", "-o", "json"))
    assert job["spec"]["template"]["spec"]["containers"][0]["command"] == ["echo", "hi"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    pod = json.loads(kubectl.out("get", *n, "pod", "p", "-o", "json"))
    assert pod["metadata"]["labels"] == {"a": "b"}
    assert pod["spec"]["containers"][0]["args"] == ["sleep", "1"]
    assert pod["spec"]["containers"][0]["env"] == [{"name": "X", "value": "1"}]
    ports = json.loads(kubectl.out("get", *n, "svc", "web", "-o", "jsonpath={.spec.ports}"))
    assert ports == [{"port": 80, "protocol": "TCP", "targetPort": 8080}]
    assert kubectl.out("get", *n, "sa", "sa", "-o", "name") == "serviceaccount/sa\n"


def test_rbac_through_kubectl(kubectl: Kubectl, namespace: str) -> None:
    """`kubectl create token`, `create role/rolebinding` (protobuf bodies), `auth can-i`,
    `auth whoami` and the API server's Forbidden message for a ServiceAccount's token."""
    kubectl.out("create", "serviceaccount", "runner", "-n", namespace)
    token = kubectl.out("create", "token", "runner", "-n", namespace).strip()
    user = f"system:serviceaccount:{namespace}:runner"
    as_runner = ["--token", token, "-n", namespace]
    denied = kubectl.run("get", "pods", *as_runner, ok=False)
    assert denied.returncode == 1
    assert denied.stderr.strip() == (
        f'Error from server (Forbidden): pods is forbidden: User "{user}" cannot list resource'
        f' "pods" in API group "" in the namespace "{namespace}"'
    )
    assert kubectl.run("auth", "can-i", "list", "pods", *as_runner, ok=False).stdout == "no\n"
    kubectl.out("create", "role", "reader", "--verb=get,list", "--resource=pods", "-n", namespace)
    kubectl.out(
        "create", "rolebinding", "reader", "--role=reader",
        f"--serviceaccount={namespace}:runner", "-n", namespace,
    )  # fmt: skip
    assert kubectl.out("auth", "can-i", "list", "pods", *as_runner) == "yes\n"
    assert kubectl.run("auth", "can-i", "delete", "pods", *as_runner, ok=False).stdout == "no\n"
    assert "No resources found" in kubectl.run("get", "pods", *as_runner).stderr
    assert user in kubectl.out("auth", "whoami", *as_runner)
    made = kubectl.run("create", "namespace", f"{namespace}-x", "--token", token, ok=False)
    assert 'cannot create resource "namespaces" in API group "" at the cluster scope' in made.stderr
