"""Workload controllers and the scheduler on the emulator, through the official client:
Jobs of unknown images, ReplicaSets replacing pods, rollouts, unschedulable GPU pods."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubemu import ClusterShape
from kubemu.testing import Harness, running_plane, wait_for

pytestmark = [pytest.mark.kubernetes]


def template(labels: dict, image: str = "busybox:1.36", **spec: object) -> dict:
    container = {"name": "main", "image": image, **spec.pop("container", {})}  # type: ignore[dict-item]
    return {
        "metadata": {"labels": labels, **spec.pop("meta", {})},
        "spec": {"containers": [container], **spec},
    }


def deployment(name: str, replicas: int = 1, **spec: object) -> dict:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": template(labels, **spec),
        },
    }


def pods(h: Harness, selector: str) -> list:
    return h.core.list_namespaced_pod("default", label_selector=selector).items


def events_for(h: Harness, name: str) -> list:
    return h.core.list_namespaced_event(
        "default", field_selector=f"involvedObject.name={name}"
    ).items


def test_a_job_of_an_unknown_image_completes_after_its_run_seconds(tmp_path: Path) -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "work"},
        "spec": {
            "completions": 2,
            "parallelism": 2,
            "template": template(
                {},
                restartPolicy="Never",
                meta={"annotations": {"emulator.testbed.io/run-seconds": "0.5"}},
            ),
        },
    }
    with running_plane(tmp_path) as h:
        h.batch.create_namespaced_job("default", job)
        done = wait_for(
            "the Job to complete",
            lambda: (
                (j := h.batch.read_namespaced_job("work", "default")).status.succeeded == 2 and j
            ),
        )
        assert [c.type for c in done.status.conditions] == ["SuccessCriteriaMet", "Complete"]
        assert done.status.completion_time >= done.status.start_time
        finished = pods(h, "job-name=work")
        assert len(finished) == 2
        for pod in finished:
            assert pod.status.phase == "Succeeded"
            [status] = pod.status.container_statuses
            assert status.state.terminated.reason == "Completed"
            assert status.state.terminated.exit_code == 0
            started, ended = status.state.terminated.started_at, status.state.terminated.finished_at
            assert (ended - started).total_seconds() >= 0  # second resolution: ≥ 0, not ≥ 0.5
        reasons = [e.reason for e in events_for(h, finished[0].metadata.name)]
        for wanted in ("Scheduled", "Pulling", "Pulled", "Created", "Started"):
            assert wanted in reasons


def test_a_job_fails_after_its_backoff_limit(tmp_path: Path) -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "broken"},
        "spec": {
            "backoffLimit": 1,
            "template": template(
                {},
                restartPolicy="Never",
                meta={
                    "annotations": {
                        "emulator.testbed.io/fault": "crash",
                        "emulator.testbed.io/fault-after": "0.1",
                    }
                },
            ),
        },
    }
    with running_plane(tmp_path) as h:
        h.batch.create_namespaced_job("default", job)
        failed = wait_for(
            "the Job to fail",
            lambda: (j := h.batch.read_namespaced_job("broken", "default")).status.conditions and j,
        )
        condition = failed.status.conditions[-1]
        assert (condition.type, condition.reason) == ("Failed", "BackoffLimitExceeded")
        assert failed.status.failed == 2


def test_a_replicaset_replaces_a_deleted_pod_and_a_template_change_rolls_out(
    tmp_path: Path,
) -> None:
    with running_plane(tmp_path) as h:
        h.apps.create_namespaced_deployment("default", deployment("web", replicas=2))
        first = wait_for(
            "2 ready pods",
            lambda: (
                len([p for p in pods(h, "app=web") if p.status.phase == "Running"]) == 2
                and pods(h, "app=web")
            ),
        )
        victim = first[0].metadata.name
        h.core.delete_namespaced_pod(victim, "default")
        again = wait_for(
            "a replacement",
            lambda: (
                (
                    names := {
                        p.metadata.name for p in pods(h, "app=web") if p.status.phase == "Running"
                    }
                )
                and victim not in names
                and len(names) == 2
                and names
            ),
        )
        assert len(again) == 2
        [rs] = h.apps.list_namespaced_replica_set("default").items
        assert rs.metadata.owner_references[0].kind == "Deployment"
        old_hash = rs.metadata.labels["pod-template-hash"]

        patch = {
            "spec": {
                "template": {"spec": {"containers": [{"name": "main", "image": "busybox:1.37"}]}}
            }
        }
        h.apps.patch_namespaced_deployment("web", "default", patch)

        def rolled() -> object:
            d = h.apps.read_namespaced_deployment("web", "default")
            live = pods(h, "app=web")
            images = {p.spec.containers[0].image for p in live}
            ok = (
                d.status.updated_replicas == 2
                and d.status.available_replicas == 2
                and images == {"busybox:1.37"}
            )
            return ok and d

        done = wait_for("the rollout", rolled)
        assert done.status.observed_generation == 2
        sets = {
            r.metadata.labels["pod-template-hash"]: r
            for r in h.apps.list_namespaced_replica_set("default").items
        }
        assert sets[old_hash].spec.replicas == 0
        assert len(sets) == 2


def test_an_unschedulable_gpu_pod_says_why_and_runs_once_capacity_frees(tmp_path: Path) -> None:
    shape = ClusterShape(nodes=3, gpus_per_node=1)
    with running_plane(tmp_path, shape=shape) as h:
        gpu = {"container": {"resources": {"limits": {"nvidia.com/gpu": "1"}}}}
        h.apps.create_namespaced_deployment("default", deployment("fill", replicas=3, **gpu))
        wait_for(
            "3 bound pods", lambda: len([p for p in pods(h, "app=fill") if p.spec.node_name]) == 3
        )
        h.apps.create_namespaced_deployment("default", deployment("extra", replicas=1, **gpu))

        def refused() -> object:
            [pod] = pods(h, "app=extra") or [None]
            conditions = {c.type: c for c in (pod.status.conditions or [])} if pod else {}
            return conditions.get("PodScheduled") and pod

        pod = wait_for("the unschedulable condition", refused)
        condition = next(c for c in pod.status.conditions if c.type == "PodScheduled")
        assert condition.status == "False"
        assert condition.reason == "Unschedulable"
        assert condition.message == (
            "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are"
            " available: 3 No preemption victims found for incoming pod."
        )
        assert pod.status.phase == "Pending"
        failed = [e for e in events_for(h, pod.metadata.name) if e.reason == "FailedScheduling"]
        assert failed[0].type == "Warning"
        assert failed[0].message == condition.message

        h.apps.patch_namespaced_deployment_scale("fill", "default", {"spec": {"replicas": 2}})
        wait_for(
            "the GPU pod to run",
            lambda: (
                h.core.read_namespaced_pod(pod.metadata.name, "default").status.phase == "Running"
            ),
        )


def test_cluster_emulate_runs_the_control_plane_with_its_fault_flags(tmp_path: Path) -> None:
    from kubernetes import client, config

    from tests.fixtures.cluster import emulated_cluster

    flags = ("--nodes", "1", "--fault", "pod=bad-*:image-pull", "--crash-backoff", "0.5")
    flags += ("--state-dir", str(tmp_path / "state"))
    with emulated_cluster(tmp_path / "emu", *flags) as kubeconfig:
        api = config.new_client_from_config(str(kubeconfig))
        try:
            core = client.CoreV1Api(api)
            script = "print('hello from a pod', flush=True)"
            hello = {
                "metadata": {"name": "hello"},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "c", "image": "testbed:1", "command": ["python", "-c", script]}
                    ],
                },
            }
            core.create_namespaced_pod("default", hello)
            core.create_namespaced_pod(
                "default",
                {
                    "metadata": {"name": "bad-1"},
                    "spec": {"containers": [{"name": "c", "image": "x:1"}]},
                },
            )
            wait_for(
                "hello to succeed",
                lambda: core.read_namespaced_pod("hello", "default").status.phase == "Succeeded",
            )
            assert core.read_namespaced_pod_log("hello", "default") == "hello from a pod\n"

            def pull_back_off() -> bool:
                statuses = (
                    core.read_namespaced_pod("bad-1", "default").status.container_statuses or []
                )
                waiting = statuses[0].state.waiting if statuses else None
                return bool(waiting) and waiting.reason == "ImagePullBackOff"

            wait_for("the --fault rule", pull_back_off)
        finally:
            api.close()
    assert (tmp_path / "state" / "logs").is_dir()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--fault", "image=x"), "write SELECTOR=GLOB:KIND[:SECONDS]"),
        (("--fault", "image=x:explode"), "'explode' is not a fault"),
        (("--crash-backoff", "0"), "--crash-backoff 0.0: must be a positive number"),
        (
            ("--testbed-image-pattern", "(("),
            "--testbed-image-pattern '((' is not a regular expression",
        ),
    ],
)
def test_bad_control_plane_flags_exit_2(
    tmp_path: Path, flags: tuple[str, ...], message: str
) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "testbed",
            "cluster",
            "emulate",
            "--kubeconfig",
            str(tmp_path / "k"),
            *flags,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert message in done.stderr


def test_a_deployment_that_never_becomes_available_exceeds_its_progress_deadline(
    tmp_path: Path,
) -> None:
    stuck = deployment("stuck", meta={"annotations": {"emulator.testbed.io/fault": "image-pull"}})
    stuck["spec"]["progressDeadlineSeconds"] = 1
    stuck["spec"]["strategy"] = {"type": "Recreate"}
    with running_plane(tmp_path) as h:
        h.apps.create_namespaced_deployment("default", stuck)

        def exceeded() -> object:
            d = h.apps.read_namespaced_deployment("stuck", "default")
            conditions = {c.type: c for c in d.status.conditions or []}
            progressing = conditions.get("Progressing")
            return progressing and progressing.reason == "ProgressDeadlineExceeded" and conditions

        conditions = wait_for("ProgressDeadlineExceeded", exceeded, timeout_s=15)
        assert conditions["Progressing"].status == "False"
        assert conditions["Available"].status == "False"
        assert conditions["Available"].reason == "MinimumReplicasUnavailable"
