"""The API server's size limits in the emulator (security suite), each refused with
kube-apiserver's status and words, through the real kubectl and the official client:
annotations over 256 KiB (apimachinery ``ValidateAnnotations``), ConfigMap and Secret data
over 1 MiB (``ValidateConfigMap``/``ValidateSecret``), request bodies over 3 MiB
(``MaxRequestBodyBytes``). The numbers and sentences below are written from kube-apiserver's
source, not from testbed's constants: this file is the oracle."""

from __future__ import annotations

import base64
import json

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.emulator.test_kubectl import Kubectl

pytestmark = [pytest.mark.kubernetes, pytest.mark.security]

KIB = 1024
ANNOTATIONS_TOO_LONG = "metadata.annotations: Too long: must have at most 262144 bytes"
CONFIGMAP_TOO_LONG = "[]: Too long: must have at most 1048576 bytes"
SECRET_TOO_LONG = "data: Too long: must have at most 1048576 bytes"
BODY_TOO_LARGE = "Request entity too large: limit is 3145728"


def _configmap(name: str, data_bytes: int, annotation_bytes: int = 0) -> dict[str, object]:
    meta: dict[str, object] = {"name": name}
    if annotation_bytes:
        meta["annotations"] = {
            "example.com/blob": "a" * (annotation_bytes - len("example.com/blob"))
        }
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
            "data": {"blob": "d" * data_bytes}}  # fmt: skip


def _refusal(error: ApiException) -> tuple[int, dict[str, object]]:
    return error.status, json.loads(error.body)


def test_annotations_are_counted_together_up_to_256_kib(
    api: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api)
    exact = _configmap("at-limit", 1, annotation_bytes=256 * KIB)
    core.create_namespaced_config_map(namespace, exact)  # exactly the limit: accepted
    over = _configmap("over-limit", 1, annotation_bytes=256 * KIB + 1)
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_config_map(namespace, over)
    status, body = _refusal(refused.value)
    assert status == 422
    assert body["reason"] == "Invalid"
    assert body["message"] == f'ConfigMap "over-limit" is invalid: {ANNOTATIONS_TOO_LONG}'
    assert body["details"]["causes"] == [  # type: ignore[index]
        {"reason": "FieldValueTooLong", "message": "Too long: must have at most 262144 bytes",
         "field": "metadata.annotations"}
    ]  # fmt: skip
    # an update (a patch) that grows them past the limit is refused the same way
    grow = {"metadata": {"annotations": {"example.com/more": "b" * 10}}}
    with pytest.raises(ApiException) as patched:
        core.patch_namespaced_config_map("at-limit", namespace, grow)
    assert _refusal(patched.value)[1]["message"] == (
        f'ConfigMap "at-limit" is invalid: {ANNOTATIONS_TOO_LONG}'
    )


def test_configmap_and_secret_data_up_to_1_mib(api: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_config_map(namespace, _configmap("mib", 1024 * KIB))
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_config_map(namespace, _configmap("mib-and-one", 1024 * KIB + 1))
    status, body = _refusal(refused.value)
    assert (status, body["reason"]) == (422, "Invalid")
    assert body["message"] == f'ConfigMap "mib-and-one" is invalid: {CONFIGMAP_TOO_LONG}'
    # binaryData counts with data, decoded
    half = base64.b64encode(b"\0" * (512 * KIB + 1)).decode()
    both = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "both"},
            "data": {"a": "d" * (512 * KIB)}, "binaryData": {"b": half}}  # fmt: skip
    with pytest.raises(ApiException):
        core.create_namespaced_config_map(namespace, both)
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "big"},
              "stringData": {"k": "s" * (1024 * KIB + 1)}}  # fmt: skip
    with pytest.raises(ApiException) as secret_refused:
        core.create_namespaced_secret(namespace, secret)
    assert _refusal(secret_refused.value)[1]["message"] == (
        f'Secret "big" is invalid: {SECRET_TOO_LONG}'
    )


def test_a_request_body_over_3_mib_is_a_413(api: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(api)
    # 3 MiB of data in one body: too large to be read, before the object is looked at
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_config_map(namespace, _configmap("huge", 3 * 1024 * KIB))
    status, body = _refusal(refused.value)
    assert status == 413
    assert body["reason"] == "RequestEntityTooLarge"
    assert body["message"] == BODY_TOO_LARGE


def test_kubectl_client_side_apply_of_a_large_configmap_is_refused(
    kubectl: Kubectl, namespace: str
) -> None:
    # 300 KiB of data: within 1 MiB, but kubectl's last-applied-configuration annotation
    # copies it whole — what a real cluster refuses (docs/export.md applies server-side)
    manifest = yaml.safe_dump(_configmap("campaign", 300 * KIB))
    applied = kubectl.run("apply", "-n", namespace, "-f", "-", stdin=manifest, ok=False)
    assert applied.returncode != 0
    assert (
        'The ConfigMap "campaign" is invalid: metadata.annotations: Too long: must have at'
        " most 262144 bytes" in applied.stderr
    )
    kubectl.out("apply", "--server-side", "-n", namespace, "-f", "-", stdin=manifest)
    stored = json.loads(kubectl.out("get", "configmap", "campaign", "-n", namespace, "-o", "json"))
    assert len(stored["data"]["blob"]) == 300 * KIB
    assert "kubectl.kubernetes.io/last-applied-configuration" not in (
        stored["metadata"].get("annotations") or {}
    )
    too_big = yaml.safe_dump(_configmap("too-big", 1024 * KIB + 1))
    created = kubectl.run("apply", "--server-side", "-n", namespace, "-f", "-", stdin=too_big,
                          ok=False)  # fmt: skip
    assert f'The ConfigMap "too-big" is invalid: {CONFIGMAP_TOO_LONG}' in created.stderr
