"""Gangs and preemption through ``testbed scale``, against a private emulator of 2 nodes × 4
GPUs: a gang of 4 workers × 2 GPUs takes the whole cluster, so 20 gangs queue; a pod watch
checks at every resourceVersion that no gang is ever partly bound. Then a higher-priority
batch preempts a lower one, and times.csv and the plot show it."""

from __future__ import annotations

import csv
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed.clients.kube.connection import ConnectionSpec
from testbed.clients.kube.rest import Kube
from testbed.probes.scale import plots, sampled, submitted, times
from testbed.probes.scale.submit import delete_all
from tests.fixtures.cluster import emulated_cluster
from tests.fixtures.gangs import PartialGangs

pytestmark = [pytest.mark.kubernetes, pytest.mark.slow]
TESTBED = [sys.executable, "-m", "testbed", "scale"]


@pytest.fixture(scope="module")
def small_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    work = tmp_path_factory.mktemp("gang-cluster")
    with emulated_cluster(work, "--nodes", "2", "--gpus-per-node", "4") as path:
        yield path


def scale(kubeconfig: Path | None, *args: str) -> subprocess.CompletedProcess[str]:
    command = [*TESTBED, *args, *(["--kubeconfig", str(kubeconfig)] if kubeconfig else [])]
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def _complete(job: dict[str, Any]) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Complete" and c["status"] == "True" for c in conditions)


def test_gangs_never_bind_partly_and_the_plot_has_their_stage(
    small_cluster: Path, tmp_path: Path
) -> None:
    out, ns = tmp_path / "gangs", "scale-gangs"
    kube = Kube.connect(ConnectionSpec(kubeconfig=str(small_cluster)))
    kube.call("POST", "/api/v1/namespaces", "create ns", body={"metadata": {"name": ns}})
    watcher = PartialGangs(small_cluster, ns)
    watcher.thread.start()
    flags = ["-t", "distributed", "--num-workers", "4", "--gang", "-n", "20", "-p", "4"]
    flags += ["-g", "2", "--run-seconds", "0.3", "--project", ns, "-o", str(out)]
    scale(small_cluster, "submit", *flags)
    jobs = kube.info("batch/v1", "Job")
    deadline = time.monotonic() + 120
    while sum(_complete(j) for j in kube.list_collection(jobs, ns)[0]) < 20:
        assert time.monotonic() < deadline, "20 gangs did not complete in 120 s"
        time.sleep(0.5)
    follow = scale(small_cluster, "sample", "-o", str(out))
    watcher.stop.set()
    watcher.thread.join(20)
    pods = kube.list_collection(kube.info("v1", "Pod"), ns)[0]
    bound = [p["metadata"]["name"] for p in pods if (p.get("spec") or {}).get("nodeName")]
    assert len(bound) >= 80  # 20 gangs of 4 workers ran
    watcher.assert_watched(bound)  # alive to the end, and it saw every one of them bind
    assert watcher.partial == []
    assert watcher.versions > 100, follow.stdout  # the watch saw the run, not an empty room
    assert watcher.most_bound == 4  # one gang at a time fits: 4 pods × 2 GPUs = 8 GPUs
    groups = kube.list_collection(kube.info("scheduling.x-k8s.io/v1alpha1", "PodGroup"), ns)[0]
    assert len(groups) == 20
    assert {g["spec"]["minMember"] for g in groups} == {4}
    table = times.rows(submitted.load(out), sampled.load(out))
    assert all("completed" in r.stages for r in table)
    gang = [r for r in table if "gang.first_scheduled" in r.extra]
    assert len(gang) == 20
    assert all(r.extra["gang.first_scheduled"] <= r.stages["scheduled"] for r in gang)
    scale(None, "plot", "-o", str(out), "--plot", "detailed")
    with (out / "times.csv").open() as handle:
        assert "gang.first_scheduled_ms" in next(csv.reader(handle))
    rows, extra = plots.with_gang(table)
    assert extra == [("first_scheduled", "scheduled")]
    assert all("first_scheduled" in r.stages for r in rows)
    assert (out / "detailed.png").stat().st_size > 10_000


def test_a_higher_priority_batch_preempts_a_lower_one_and_the_plot_rings_it(
    small_cluster: Path, tmp_path: Path
) -> None:
    ns = "scale-preempt"
    kube = Kube.connect(ConnectionSpec(kubeconfig=str(small_cluster)))
    kube.call("POST", "/api/v1/namespaces", "create ns", body={"metadata": {"name": ns}})
    for name, value in (("batch-low", 10), ("batch-high", 1000)):
        body = {"metadata": {"name": name}, "value": value}
        kube.call("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", "create pc", body=body)
    low, high = tmp_path / "low", tmp_path / "high"
    common = ["-t", "training", "-g", "4", "--project", ns, "-n"]
    scale(small_cluster, "submit", *common, "2", "--priority-class", "batch-low", "-o", str(low))
    _wait_running(small_cluster, low, 2)  # both low workloads hold 4 GPUs each: all 8
    scale(small_cluster, "submit", *common, "1", "--priority-class", "batch-high", "-o", str(high))
    _wait_running(small_cluster, high, 1)
    scale(small_cluster, "sample", "-o", str(low))
    table = times.rows(submitted.load(low), sampled.load(low))
    hit = [r for r in table if "event.Pod.Preempted" in r.extra]
    assert len(hit) == 1  # one node's 4 GPUs were enough: one victim
    assert "running" not in hit[0].stages  # its replacement waits behind the preemptor
    done = scale(None, "plot", "-o", str(low), "--plot", "detailed")
    assert "wrote" in done.stdout
    with (low / "times.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [bool(r["event.Pod.Preempted_ms"]) for r in rows].count(True) == 1
    t0 = times.origin_ms(table)
    until = sampled.load(low).observed_until_ms
    assert len(plots.preempted_points(table, "submitted", "created", until, t0)) == 1
    for out in (low, high):
        delete_all(kube, submitted.load(out))


def _wait_running(kubeconfig: Path, out: Path, wanted: int) -> None:
    deadline = time.monotonic() + 60
    while True:
        scale(kubeconfig, "sample", "-o", str(out))
        table = times.rows(submitted.load(out), sampled.load(out))
        if sum("running" in r.stages for r in table) >= wanted:
            return
        assert time.monotonic() < deadline, f"{wanted} workload(s) of {out} not running in 60 s"
        time.sleep(0.5)
