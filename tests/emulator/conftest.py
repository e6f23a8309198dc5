"""Clients of the session's emulated cluster for the emulator's tests: the official client,
kubectl, and a namespace of the test's own (tests sharing the cluster stay independent)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from tests.emulator.test_kubectl import Kubectl


@pytest.fixture(scope="module")
def api(cluster_kubeconfig: Path) -> Iterator[client.ApiClient]:
    api_client = config.new_client_from_config(config_file=str(cluster_kubeconfig))
    yield api_client
    api_client.close()


@pytest.fixture(scope="module")
def kubectl(cluster_kubeconfig: Path) -> Kubectl:
    return Kubectl(cluster_kubeconfig)


@pytest.fixture
def namespace(api: client.ApiClient) -> Iterator[str]:
    """A fresh namespace, deleted afterwards unless the test deleted it itself."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    if any(ns.metadata.name == name for ns in core.list_namespace().items):
        core.delete_namespace(name)
