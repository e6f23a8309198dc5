"""End-to-end support: a cluster to run against, ``testbed`` as a child, and the count of a
run's objects left in the API.

The ``cluster`` marker's tests run against ``$KUBECONFIG``'s cluster when that variable is set
when the session starts (the real-cluster rehearsal of docs/kubernetes.md), else against the
session's emulated cluster (``tests/fixtures/cluster.py``) — CI has no cluster.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed.clients.kube import ConnectionSpec, Kube, connect
from testbed.core.errors import ClusterNotFound

REAL_KUBECONFIG = os.environ.get("KUBECONFIG")
SRC = Path(__file__).resolve().parents[3] / "src"
QUICKSTART = SRC.parent / "examples" / "quickstart.yaml"
#: Self-check limits for runs whose subject is not the load generator's self-check (as
#: tests/probes/load/conftest.py): generous on a machine busy with other work, not off.
LENIENT_SELFCHECK = {"max_lag_p99_ms": 250.0, "min_rate_ratio": 0.5, "max_cpu_fraction": 1.0}
#: The real quickstart (the hf reference server with the bundled model, and the simulator)
#: with its load cut to 4 requests at concurrency 2: what tests comparing its verdicts
#: across backends and probe placements need, in a fraction of its minutes.
QUICKSTART_CUT = ["load.requests=4", "load.concurrency=2",
                  f"load.selfcheck={json.dumps(LENIENT_SELFCHECK)}"]  # fmt: skip
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


@contextlib.contextmanager
def kube_of(kubeconfig: Path) -> Iterator[Kube]:
    """A client of the cluster ``kubeconfig`` names, over a connection of its own."""
    api = connect(ConnectionSpec(kubeconfig=str(kubeconfig)))
    try:
        yield Kube(api)
    finally:
        api.close()


@pytest.fixture
def kube(kubeconfig: Path) -> Iterator[Kube]:
    with kube_of(kubeconfig) as client:
        yield client


def quickstart_args(*sets: str) -> list[str]:
    """``QUICKSTART --set …`` of :data:`QUICKSTART_CUT` and ``sets``."""
    return [str(QUICKSTART), *[x for s in [*QUICKSTART_CUT, *sets] for x in ("--set", s)]]


@pytest.fixture(scope="session")
def quickstart_on_cluster(kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cut quickstart run on the cluster with its probes in testbed's process (run id
    ``qs-controller``, exit 0): its run directory, shared by the tests comparing it with a
    run on this machine and with one probing from Jobs in the cluster."""
    work = tmp_path_factory.mktemp("quickstart")
    run_dir = work / "qs-controller"
    args = ["run", *quickstart_args("backend.kind=kubernetes"), "--out", str(run_dir)]
    result = run_cli(args, kubeconfig, work, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return run_dir


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
    with kube_of(kubeconfig) as kube:
        return leftovers(kube, run_id)


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


def slow_schedule(seconds: str) -> dict[str, Any]:
    """Placement annotations: the emulator schedules the pods ``seconds`` after they appear."""
    return {
        "pod_annotations": {
            "emulator.testbed.io/fault": "slow-schedule",
            "emulator.testbed.io/schedule-delay": seconds,
        }
    }


def await_object(kube: Kube, kind: str, run_id: str, child: subprocess.Popen[str]) -> None:
    """Wait (90 s at most) until run ``run_id``, the running ``child``, has made a ``kind``."""
    deadline = time.monotonic() + 90
    while not kube.list_objects(kind, None, f"testbed.io/run={run_id}")[0]:
        assert time.monotonic() < deadline, f"the run's {kind} never appeared"
        assert child.poll() is None, child.communicate()[0]
        time.sleep(0.05)
