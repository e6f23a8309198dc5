"""The scale test against the emulator: the three commands as the seed uses them (sample and
plot while submit is still going), resume without duplicates, and stage times that agree
with the emulator's own event times."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from testbed.clients.kube.connection import ConnectionSpec
from testbed.clients.kube.rest import KindInfo, Kube
from testbed.config.scale import ScaleProbe
from testbed.probes.scale import sampled, submitted, times
from testbed.probes.scale.probe import finished
from testbed.probes.scale.sample import Sampler
from testbed.probes.scale.stages import parse_time
from testbed.probes.scale.submit import Submitter, delete_all, labels, open_header, template_for

pytestmark = [pytest.mark.kubernetes, pytest.mark.slow]
TESTBED = [sys.executable, "-m", "testbed"]


def _cli(*args: str, kubeconfig: Path | None = None) -> list[str]:
    return [*TESTBED, "scale", *args, *(["--kubeconfig", str(kubeconfig)] if kubeconfig else [])]


def _wait_for(condition, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _running(out: Path) -> int:
    try:
        pods = json.loads((out / "sampled.json").read_text())["pods"].values()
    except (OSError, ValueError, KeyError):
        return 0
    return sum(p.get("phase") == "Running" for p in pods)


def test_sample_and_plot_while_submit_runs_then_resume(
    cluster_kubeconfig: Path, tmp_path: Path
) -> None:
    out, ns = tmp_path / "out", "scale-cli"

    def submit(count: int) -> list[str]:
        flags = ["-o", str(out), "-n", str(count), "-p", "1", "--delay", "1.5", "-g", "1"]
        return _cli("submit", *flags, "--project", ns, kubeconfig=cluster_kubeconfig)

    submitter = subprocess.Popen(submit(12), stdout=subprocess.PIPE, text=True)
    follower = None
    try:
        _wait_for((out / "submitted.json").exists, 30, "the submitter's header")
        follower = subprocess.Popen(
            _cli(
                "sample",
                "-o",
                str(out),
                "--follow",
                "--timeout",
                "120",
                kubeconfig=cluster_kubeconfig,
            ),
            stdout=subprocess.DEVNULL,
        )
        once = subprocess.run(
            _cli(
                "sample", "-t", "training", "-p", ns, "-o", str(out), kubeconfig=cluster_kubeconfig
            ),
            capture_output=True,
            text=True,
            check=False,
        )
        assert once.returncode == 0, once.stderr
        early = subprocess.run(
            _cli("plot", "-o", str(out)), capture_output=True, text=True, check=False
        )
        assert early.returncode == 0, early.stderr
        assert submitter.poll() is None, "submit ended before sample and plot ran beside it"
        with (out / "times.csv").open() as handle:
            assert 0 < len(list(csv.DictReader(handle))) < 12
        submit_out, _ = submitter.communicate(timeout=120)
        assert submitter.returncode == 0
        assert "12 created" in submit_out
        _wait_for(lambda: _running(out) == 12, 60, "12 running pods in sampled.json")
        time.sleep(1.2)  # the follower saves once a second
        follower.send_signal(signal.SIGINT)
        assert follower.wait(timeout=30) == 0
    finally:
        for process in (submitter, follower):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
    final = subprocess.run(
        _cli(
            "plot",
            "-o",
            str(out),
            "--plot",
            "detailed",
            "--threshold",
            "p99 scheduled→running < 5 s",
        ),
        capture_output=True,
        text=True,
        check=False,
    )
    assert final.returncode == 0, final.stdout + final.stderr
    assert "PASS" in final.stdout
    with (out / "times.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [r["status"] for r in rows] == ["done"] * 12
    assert all(r["scheduled_source"] == "event" for r in rows)
    assert (out / "detailed.png").stat().st_size > 10_000
    # a rerun with more workloads adds only the new ones: deterministic names, no duplicates
    again = subprocess.run(submit(14), capture_output=True, text=True, check=False)
    assert again.returncode == 0, again.stderr
    assert "2 created, 0 existed, 0 error(s), 12 recorded before" in again.stdout
    kube = Kube.connect(ConnectionSpec(kubeconfig=str(cluster_kubeconfig)))
    header = submitted.load(out).header
    assert header is not None
    mine = f"testbed.io/scale-run={header.run}"
    jobs, _ = kube.list_collection(KindInfo("batch/v1", "jobs"), ns, mine)
    assert len(jobs) == 14
    cleaned = subprocess.run(
        _cli("clean", "-o", str(out), kubeconfig=cluster_kubeconfig),
        capture_output=True,
        text=True,
        check=False,
    )
    assert "14 object(s) deleted" in cleaned.stdout


def test_killed_submitter_resumes_without_duplicates(
    cluster_kubeconfig: Path, tmp_path: Path
) -> None:
    out, ns = tmp_path / "out", "scale-kill"
    command = _cli(
        "submit",
        "-o",
        str(out),
        "-n",
        "30",
        "-p",
        "3",
        "--delay",
        "0.3",
        "-g",
        "0",
        "--project",
        ns,
        kubeconfig=cluster_kubeconfig,
    )
    first = subprocess.Popen(command, stdout=subprocess.DEVNULL, start_new_session=True)
    _wait_for(lambda: len(submitted.load(out).workloads) >= 6, 60, "some submissions")
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    before = len(submitted.load(out).workloads)
    assert before < 30
    second = subprocess.run(command, capture_output=True, text=True, check=False)
    assert second.returncode == 0, second.stderr
    assert f"{before} recorded before" in second.stdout
    subs = submitted.load(out)
    assert sorted(subs.workloads) == list(range(30))
    kube = Kube.connect(ConnectionSpec(kubeconfig=str(cluster_kubeconfig)))
    jobs, _ = kube.list_collection(KindInfo("batch/v1", "jobs"), ns)
    assert sorted(j["metadata"]["name"] for j in jobs) == sorted(s.name for s in subs.ordered())
    delete_all(kube, subs)


def test_stage_times_agree_with_the_emulators_events(
    cluster_kubeconfig: Path, tmp_path: Path
) -> None:
    kube = Kube.connect(ConnectionSpec(kubeconfig=str(cluster_kubeconfig)))
    config = ScaleProbe(workloads=8, parallel=4, gpus=1, workload_type="distributed", workers=2)
    template = template_for(config, tmp_path)
    header, _ = open_header(tmp_path, config, template, "scale-times", None)
    kube.ensure_namespace("scale-times", labels(header))
    submitter = Submitter(kube, tmp_path, config, template, header)
    submitter.check()
    submitting, stop, synced = threading.Event(), threading.Event(), threading.Event()
    submitting.set()
    result: dict[str, object] = {}
    sampler = threading.Thread(
        target=lambda: result.update(
            stats=Sampler(kube, tmp_path, header).run(
                True, stop, finished(tmp_path, "running", submitting), synced
            )
        ),
    )
    sampler.start()
    # the sampler watches before the first workload exists, as `testbed scale sample
    # --follow` started ahead of `submit` does: every transition is then seen live
    assert synced.wait(timeout=30), "the sampler's watches did not start"
    try:
        outcome = submitter.run(set())
        submitting.clear()
        sampler.join(timeout=60)
        assert not sampler.is_alive(), "the sampler did not see every workload running"
    finally:
        stop.set()
        sampler.join(timeout=10)
    assert outcome.created == 8
    facts = result["stats"].facts  # type: ignore[attr-defined]
    table = times.rows(submitted.load(tmp_path), facts)
    events_info = kube.info("events.k8s.io/v1", "Event")
    events, _ = kube.list_collection(events_info, "scale-times")
    scheduled: dict[str, float] = {}
    started: dict[str, float] = {}
    for event in events:
        pod = facts.pods.get(f"scale-times/{event['regarding']['name']}")
        if event["regarding"]["kind"] != "Pod" or pod is None:
            continue  # a Job's event, or another run's
        workload = pod["workload"]
        stamp = parse_time(event["eventTime"])
        assert stamp is not None
        assert stamp[1], "the emulator's eventTime has microseconds"
        target = {"Scheduled": scheduled, "Started": started}.get(event["reason"])
        if target is not None:
            target[workload] = max(target.get(workload, 0.0), stamp[0])
    for row in table:
        assert row.pods == 2
        assert abs(row.stages["scheduled"] - scheduled[row.name]) <= 10.0
        assert abs(row.stages["started"] - started[row.name]) <= 10.0
        # phase Running has no event: the watch saw it, after the Started event was written
        assert row.sources["running"] == "watch"
        assert row.stages["running"] >= started[row.name] - 1.0
    delete_all(kube, submitted.load(tmp_path))


def test_custom_resource_workloads_through_discovery(
    cluster_kubeconfig: Path, tmp_path: Path
) -> None:
    kube = Kube.connect(ConnectionSpec(kubeconfig=str(cluster_kubeconfig)))
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "trainingworkloads.run.ai"},
        "spec": {
            "group": "run.ai",
            "scope": "Namespaced",
            "names": {
                "plural": "trainingworkloads",
                "singular": "trainingworkload",
                "kind": "TrainingWorkload",
            },
            "versions": [
                {
                    "name": "v2alpha1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }
    kube.call(
        "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "create CRD", body=crd
    )
    template = tmp_path / "tw.yaml"
    template.write_text(
        'apiVersion: run.ai/v2alpha1\nkind: TrainingWorkload\nmetadata: {name: "{{ name }}"}\n'
        "spec: {gpu: {value: '{{ gpus }}'}, anythingElse: [1, 2]}\n"
    )
    out = tmp_path / "out"
    submit = _cli(
        "submit",
        "-o",
        str(out),
        "-n",
        "3",
        "--template",
        str(template),
        "--project",
        "scale-crd",
        kubeconfig=cluster_kubeconfig,
    )
    done = subprocess.run(submit, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "3 created" in done.stdout
    info = kube.info("run.ai/v2alpha1", "TrainingWorkload")
    items, _ = kube.list_collection(info, "scale-crd")
    assert sorted(i["spec"]["anythingElse"] for i in items) == [[1, 2]] * 3
    sampled_run = subprocess.run(
        _cli("sample", "-o", str(out), kubeconfig=cluster_kubeconfig),
        capture_output=True,
        text=True,
        check=False,
    )
    assert "3 object(s)" in sampled_run.stdout, sampled_run.stderr
    table = times.rows(submitted.load(out), sampled.load(out))
    assert all("created" in r.stages for r in table)
    delete_all(kube, submitted.load(out))
