"""Datashim on the emulator (``--datashim``): seed 004's Secret, Dataset and a labelled pod,
applied with kubectl, read the bucket at /mnt/datasets/<dataset>; what cannot mount says so
and mounts once fixed; the claim goes with its Dataset."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from kubemu.testing import Harness, running_plane, wait_for
from tests.fixtures.s3 import moto_client

pytestmark = [pytest.mark.kubernetes]

NS = "datashim-demo"
SEED_004 = """
apiVersion: v1
kind: Secret
metadata:
  name: model-weights-secret
stringData:
  accessKeyID: "seed-key"
  secretAccessKey: "seed-secret"
---
apiVersion: datashim.io/v1alpha1
kind: Dataset
metadata:
  name: model-weights
spec:
  local:
    provision: "true"
    bucket: my-model
    endpoint: ENDPOINT
    secret-name: model-weights-secret
    type: COS
"""


def reader(name: str, dataset: str, path: str) -> dict[str, Any]:
    """A pod that prints a file of the mounted dataset, labelled as seed 004's TGI pods are."""
    return {
        "metadata": {
            "name": name,
            "labels": {"dataset.0.id": dataset, "dataset.0.useas": "mount"},
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "testbed:latest",
                    "command": ["python", "-c", "import sys; print(open(sys.argv[1]).read())"],
                    "args": [f"/mnt/datasets/{dataset}/{path}"],
                }
            ],
        },
    }


def kubectl(h: Harness, *args: str, stdin: str | None = None) -> str:
    env = {**os.environ, "KUBECONFIG": str(h.kubeconfig)}
    result = subprocess.run(
        ["kubectl", *args],
        input=stdin,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def phase(h: Harness, name: str) -> str | None:
    return h.core.read_namespaced_pod(name, NS).status.phase


def bucket(moto_s3: str, name: str, objects: dict[str, bytes]) -> None:
    s3 = moto_client(moto_s3)
    s3.create_bucket(Bucket=name)
    for key, body in objects.items():
        s3.put_object(Bucket=name, Key=key, Body=body)


def test_seed_004_dataset_mounts_its_bucket_into_labelled_pods(
    tmp_path: Path, moto_s3: str
) -> None:
    bucket(moto_s3, "my-model", {"flan-t5-small/config.json": b'{"d_model": 512}'})
    with running_plane(tmp_path, datashim=True) as h:
        kubectl(h, "create", "namespace", NS)
        kubectl(h, "label", "namespace", NS, "monitor-pods-datasets=enabled")
        kubectl(h, "apply", "-n", NS, "-f", "-", stdin=SEED_004.replace("ENDPOINT", moto_s3))
        custom = client.CustomObjectsApi(h.api)
        dataset = wait_for(
            "the Dataset's status",
            lambda: custom.get_namespaced_custom_object(
                "datashim.io", "v1alpha1", NS, "datasets", "model-weights"
            ).get("status"),
        )
        assert dataset["provision"] == {"status": "OK"}
        claim = h.core.read_namespaced_persistent_volume_claim("model-weights", NS)
        assert claim.status.phase == "Bound"
        assert claim.metadata.owner_references[0].kind == "Dataset"

        h.core.create_namespaced_pod(
            NS, reader("tgi", "model-weights", "flan-t5-small/config.json")
        )
        wait_for("the reader to finish", lambda: phase(h, "tgi") == "Succeeded", 60)
        assert kubectl(h, "logs", "-n", NS, "tgi").strip() == '{"d_model": 512}'
        spec = h.core.read_namespaced_pod("tgi", NS).spec
        assert [v.persistent_volume_claim.claim_name for v in spec.volumes] == ["model-weights"]
        assert spec.containers[0].volume_mounts[0].mount_path == "/mnt/datasets/model-weights"

        kubectl(h, "delete", "dataset", "-n", NS, "model-weights")
        wait_for(
            "the claim to go with its Dataset",
            lambda: not h.core.list_namespaced_persistent_volume_claim(NS).items,
        )


def test_a_dataset_that_cannot_mount_says_why_and_mounts_once_fixed(
    tmp_path: Path, moto_s3: str
) -> None:
    bucket(moto_s3, "late-keys", {"a.txt": b"found"})
    dataset = {
        "apiVersion": "datashim.io/v1alpha1",
        "kind": "Dataset",
        "metadata": {"name": "late"},
        "spec": {
            "local": {
                "type": "COS",
                "bucket": "late-keys",
                "endpoint": moto_s3,
                "secret-name": "keys",
            }
        },
    }
    with running_plane(tmp_path, datashim=True) as h:
        h.core.create_namespace(
            {"metadata": {"name": NS, "labels": {"monitor-pods-datasets": "enabled"}}}
        )
        custom = client.CustomObjectsApi(h.api)
        custom.create_namespaced_custom_object("datashim.io", "v1alpha1", NS, "datasets", dataset)
        wait_for("the claim", lambda: h.core.list_namespaced_persistent_volume_claim(NS).items)
        h.core.create_namespaced_pod(NS, reader("early", "late", "a.txt"))

        def failed_mount() -> list[str]:
            events = h.core.list_namespaced_event(NS, field_selector="reason=FailedMount")
            return [e.message for e in events.items]

        messages = wait_for("a FailedMount event", failed_mount)
        assert messages[0] == 'MountVolume.SetUp failed for volume "late": secret "keys" not found'
        assert phase(h, "early") == "Pending"
        h.core.create_namespaced_secret(
            NS,
            {
                "metadata": {"name": "keys"},
                "stringData": {"accessKeyID": "seed-key", "secretAccessKey": "seed-secret"},
            },
        )
        wait_for("the retried mount", lambda: phase(h, "early") == "Succeeded", 60)
        assert h.core.read_namespaced_pod_log("early", NS).strip() == "found"


def test_webhook_scope_and_refusals(tmp_path: Path) -> None:
    """Only labelled namespaces are mutated; a use the emulator cannot honour is refused; a
    Dataset missing its bucket says so in its status."""
    with running_plane(tmp_path, datashim=True) as h:
        h.core.create_namespace({"metadata": {"name": NS}})  # not labelled
        h.core.create_namespaced_pod(NS, reader("plain", "anything", "x"))
        assert not h.core.read_namespaced_pod("plain", NS).spec.volumes
        kubectl(h, "label", "namespace", NS, "monitor-pods-datasets=enabled")
        refused = reader("configmap", "anything", "x")
        refused["metadata"]["labels"]["dataset.0.useas"] = "configmap"
        with pytest.raises(client.ApiException) as caught:
            h.core.create_namespaced_pod(NS, refused)
        assert caught.value.status == 403
        assert "dataset.0.useas: 'configmap' (the emulator mounts only)" in caught.value.body
        custom = client.CustomObjectsApi(h.api)
        custom.create_namespaced_custom_object(
            "datashim.io",
            "v1alpha1",
            NS,
            "datasets",
            {"metadata": {"name": "nobucket"}, "spec": {"local": {"type": "COS"}}},
        )
        status = wait_for(
            "the failed status",
            lambda: custom.get_namespaced_custom_object(
                "datashim.io", "v1alpha1", NS, "datasets", "nobucket"
            ).get("status"),
        )
        assert status["provision"]["status"] == "Failed"
        assert "spec.local needs bucket, endpoint, secret-name" in status["provision"]["info"]
        assert not h.core.list_namespaced_persistent_volume_claim(NS).items
