"""A shared cluster's turn (backend.lease): a coordination.k8s.io Lease taken before the first
phase, renewed, released after the final cleanup. A second holder waits ("waiting for …
since …") or, not waiting, is refused; a crashed holder's Lease expires; two `testbed run`
against one cluster queue, and --no-wait exits 3."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from testbed.backends.kubernetes.lease import ClusterBusy, ClusterLease
from testbed.clients.kube import Kube
from tests.backends.kubernetes.conftest import SRC, run_cli

pytestmark = [pytest.mark.kubernetes, pytest.mark.cluster]


@pytest.fixture
def namespace(kube: Kube) -> Iterator[str]:
    name = f"lease-{uuid.uuid4().hex[:8]}"
    yield name
    with contextlib.suppress(Exception):
        kube.delete("Namespace", name)


def lease(
    kube: Kube, namespace: str, holder: str, duration_s: int, said: list[str]
) -> ClusterLease:
    return ClusterLease(kube, namespace, "testbed", holder, duration_s, said.append)


async def test_a_second_run_waits_for_the_holder_and_takes_over_on_release(
    kube: Kube, namespace: str
) -> None:
    said_a: list[str] = []
    said_b: list[str] = []
    spoke = asyncio.Event()
    first = lease(kube, namespace, "run-a@host", 60, said_a)
    second = lease(kube, namespace, "run-b@host", 60, said_b)
    second.say = lambda line: (said_b.append(line), spoke.set())  # type: ignore[func-returns-value]
    await first.acquire(wait=True)
    with pytest.raises(ClusterBusy, match=r"waiting for run-a@host since \d{4}-"):
        await second.acquire(wait=False)
    waiting = asyncio.ensure_future(second.acquire(wait=True))
    async with asyncio.timeout(10):
        await spoke.wait()
    assert said_b[0].startswith("waiting for run-a@host since ")
    assert not waiting.done()
    await first.release()
    async with asyncio.timeout(10):  # taken at the next look (a second), not at expiry
        await waiting
    spec = kube.get("Lease", "testbed", namespace)["spec"]  # type: ignore[index]
    assert spec["holderIdentity"] == "run-b@host"
    assert spec["leaseTransitions"] == 1
    await second.release()
    spec = kube.get("Lease", "testbed", namespace)["spec"]  # type: ignore[index]
    assert spec.get("holderIdentity") is None


@pytest.mark.timing
async def test_a_crashed_holders_lease_expires_and_a_renewed_one_does_not(
    kube: Kube, namespace: str
) -> None:
    said: list[str] = []
    alive = lease(kube, namespace, "alive@host", 5, said)
    async with alive.held(wait=True):  # renewed every 5/3 s while held
        await asyncio.sleep(7)
        with pytest.raises(ClusterBusy):
            await lease(kube, namespace, "other@host", 5, said).acquire(wait=False)
    crashed = lease(kube, namespace, "crashed@host", 5, said)
    await crashed.acquire(wait=True)  # and never renewed: as if its process was killed
    started = time.monotonic()
    await lease(kube, namespace, "next@host", 5, said).acquire(wait=True)
    waited = time.monotonic() - started
    # expiry is judged on the waiter's clock: unchanged for the whole duration since seen
    assert 5.0 <= waited < 5.0 + 10.0, waited
    assert any("crashed@host stopped renewing" in line for line in said)


CAMPAIGN = """\
name: lease-{tag}
backend:
  kind: kubernetes
  lease: {{namespace: {namespace}, duration_s: 30}}
deployments: [{{name: sim, server: sim, params: {{ttft_ms: 2}}}}]
load: {{requests: 4, dataset: {{kind: synthetic, input_tokens: 8, output_tokens: 4}}}}
steps:
  prepare:
    - name: hold
      run: [sh, -c, 'touch "$1/{tag}-started"; until [ -f "$1/go" ]; do sleep 0.1; done;
            test ! -f "$1/{tag}-must-follow" || test -f "$1/{other}-finished"', sh, "{work}"]
      timeout_s: 240
  final_cleanup:
    - {{name: done, run: [touch, "{work}/{tag}-finished"]}}
"""


def _campaign(tmp_path: Path, namespace: str, tag: str, other: str) -> Path:
    path = tmp_path / f"{tag}.yaml"
    text = CAMPAIGN.format(tag=tag, other=other, namespace=namespace, work=tmp_path)
    path.write_text(text)
    return path


def _spawn(args: list[str], kubeconfig: Path, cwd: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "PYTHONPATH": str(SRC)}
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "testbed", *args],
            cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip


def _wait_until(done: Callable[[], bool], process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 180
    while not done():
        assert process.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)


@pytest.mark.slow
def test_two_runs_against_one_cluster_queue(
    tmp_path: Path, kubeconfig: Path, namespace: str
) -> None:
    logs = {tag: tmp_path / f"{tag}.log" for tag in "ab"}
    runs: list[subprocess.Popen[bytes]] = []
    try:
        a_file = str(_campaign(tmp_path, namespace, "a", "b"))
        runs.append(_spawn(["run", a_file, "--out", "ra"], kubeconfig, tmp_path, logs["a"]))
        # a holds the Lease: it is in its prepare, until `go`
        _wait_until((tmp_path / "a-started").exists, runs[0], logs["a"])
        (tmp_path / "b-must-follow").touch()  # b's step passes only after a's final cleanup
        b_file = str(_campaign(tmp_path, namespace, "b", "a"))
        runs.append(_spawn(["run", b_file, "--out", "rb"], kubeconfig, tmp_path, logs["b"]))
        _wait_until(lambda: "waiting for ra@" in logs["b"].read_text(), runs[1], logs["b"])
        c_file = str(_campaign(tmp_path, namespace, "c", "a"))
        busy = run_cli(["run", c_file, "--out", "rc", "--no-wait"], kubeconfig, tmp_path)
        assert busy.returncode == 3, busy.stdout + busy.stderr
        assert "waiting for ra@" in busy.stderr
        assert "--no-wait" in busy.stderr
        assert not (tmp_path / "b-started").exists()
        (tmp_path / "go").touch()
        for tag, run in zip("ab", runs, strict=True):
            assert run.wait(timeout=300) == 0, logs[tag].read_text()
        assert (tmp_path / "b-finished").exists()
    finally:
        for run in runs:
            if run.poll() is None:
                run.kill()
                run.wait()
