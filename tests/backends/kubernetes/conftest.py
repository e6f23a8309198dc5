"""End-to-end support: a cluster to run against, ``testbed`` as a child, and the count of a
run's objects left in the API.

The ``cluster`` marker's tests run against ``$KUBECONFIG``'s cluster when that variable is set
when the session starts (the real-cluster rehearsal of docs/kubernetes.md), else against the
session's emulated cluster (``tests/fixtures/cluster.py``) — CI has no cluster.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed.clients.kube import ConnectionSpec, Kube, connect
from testbed.core.errors import ClusterNotFound

REAL_KUBECONFIG = os.environ.get("KUBECONFIG")
SRC = Path(__file__).resolve().parents[3] / "src"
#: Every kind a run may create; all must be empty for the run's label afterwards.
RUN_KINDS = (
    "Namespace",
    "Deployment",
    "ReplicaSet",
    "Pod",
    "Service",
    "Secret",
    "Dataset",
    "PersistentVolumeClaim",
)


@pytest.fixture(scope="session")
def kubeconfig(request: pytest.FixtureRequest) -> Path:
    if REAL_KUBECONFIG:
        return Path(REAL_KUBECONFIG)
    path: Path = request.getfixturevalue("cluster_kubeconfig")
    return path


@pytest.fixture
def kube(kubeconfig: Path) -> Iterator[Kube]:
    api = connect(ConnectionSpec(kubeconfig=str(kubeconfig)))
    yield Kube(api)
    api.close()


def run_cli(
    args: list[str], kubeconfig: Path, cwd: Path, timeout: float = 300, **popen: Any
) -> subprocess.CompletedProcess[str]:
    """``testbed ARGS`` as a child process against ``kubeconfig``."""
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "PYTHONPATH": str(SRC)}
    return subprocess.run(
        [sys.executable, "-m", "testbed", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        **popen,
    )


def spawn(args: list[str], kubeconfig: Path, cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "PYTHONPATH": str(SRC)}
    return subprocess.Popen(
        [sys.executable, "-m", "testbed", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def leftovers(kube: Kube, run_id: str) -> list[str]:
    """Every object of any kind labelled with ``run_id``, in every namespace."""
    left = []
    for kind in RUN_KINDS:
        try:
            items, _ = kube.list_objects(kind, None, f"testbed.io/run={run_id}")
        except ClusterNotFound:
            continue  # a CRD the cluster does not serve (Datashim's Dataset)
        left += [
            f"{kind}/{i['metadata'].get('namespace', '')}/{i['metadata']['name']}" for i in items
        ]
    return left


def leftovers_at(kubeconfig: Path, run_id: str) -> list[str]:
    """:func:`leftovers` on the cluster ``kubeconfig`` names, over a connection of its own."""
    api = connect(ConnectionSpec(kubeconfig=str(kubeconfig)))
    try:
        return leftovers(Kube(api), run_id)
    finally:
        api.close()


def kubectl_get_all(kubeconfig: Path, run_id: str) -> str:
    result = subprocess.run(
        ["kubectl", "get", "all", "-A", "-l", f"testbed.io/run={run_id}"],
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return (result.stdout + result.stderr).strip()
