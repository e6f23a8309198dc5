"""Injected faults and broken configurations end in the statuses a real cluster shows."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kubemu import FaultRule
from kubemu.testing import Harness, running_plane, wait_for

pytestmark = [pytest.mark.kubernetes]


def pod(
    name: str, image: str = "busybox:1.36", notes: dict | None = None, **container: object
) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": notes or {}},
        "spec": {"containers": [{"name": "main", "image": image, **container}]},
    }


def status_of(h: Harness, name: str) -> object:
    return h.core.read_namespaced_pod(name, "default").status


def waiting_reason(h: Harness, name: str) -> str | None:
    statuses = status_of(h, name).container_statuses or []
    waiting = statuses[0].state.waiting if statuses else None
    return waiting.reason if waiting else None


def reasons(h: Harness, name: str) -> list[tuple[str, str]]:
    items = h.core.list_namespaced_event(
        "default", field_selector=f"involvedObject.name={name}"
    ).items
    return [(e.reason, e.message) for e in items]


def test_image_pull_fault_shows_err_image_pull_then_back_off(tmp_path: Path) -> None:
    with running_plane(tmp_path) as h:
        h.core.create_namespaced_pod(
            "default", pod("pull", notes={"emulator.testbed.io/fault": "image-pull"})
        )
        wait_for("ErrImagePull", lambda: waiting_reason(h, "pull") == "ErrImagePull")
        wait_for("ImagePullBackOff", lambda: waiting_reason(h, "pull") == "ImagePullBackOff")
        status = status_of(h, "pull")
        assert status.phase == "Pending"
        assert (
            'Back-off pulling image "busybox:1.36"'
            in status.container_statuses[0].state.waiting.message
        )
        seen = reasons(h, "pull")
        assert ("Failed", "Error: ErrImagePull") in seen
        assert ("Failed", "Error: ImagePullBackOff") in seen
        assert any(r == "BackOff" for r, _ in seen)


def test_a_run_level_rule_hits_the_images_it_matches(tmp_path: Path) -> None:
    rules = (FaultRule.parse("image=*special*:image-pull"),)
    with running_plane(tmp_path, faults=rules) as h:
        h.core.create_namespaced_pod("default", pod("hit", image="special:1"))
        h.core.create_namespaced_pod("default", pod("miss", image="plain:1"))
        wait_for("the rule to hit", lambda: waiting_reason(h, "hit") == "ErrImagePull")
        wait_for("the other pod to run", lambda: status_of(h, "miss").phase == "Running")


def test_a_crash_fault_on_a_server_goes_into_crash_loop_back_off(tmp_path: Path) -> None:
    notes = {"emulator.testbed.io/fault": "crash", "emulator.testbed.io/fault-after": "1"}
    sim = pod(
        "crash",
        image="testbed:0.1.0",
        notes=notes,
        command=["testbed"],
        args=["serve", "sim", "--port", "8000", "--host", "0.0.0.0"],
        ports=[{"containerPort": 8000}],
    )
    with running_plane(tmp_path) as h:
        h.core.create_namespaced_pod("default", sim)
        wait_for(
            "CrashLoopBackOff",
            lambda: waiting_reason(h, "crash") == "CrashLoopBackOff",
            timeout_s=30,
        )
        [status] = status_of(h, "crash").container_statuses
        assert status.restart_count >= 1
        last = status.last_state.terminated
        assert (last.exit_code, last.reason) == (1, "Error")
        assert "back-off" in status.state.waiting.message
        assert any(r == "BackOff" for r, _ in reasons(h, "crash"))


def test_a_process_that_exits_crash_loops_with_its_real_last_lines(tmp_path: Path) -> None:
    script = "import sys; print('loading', flush=True); sys.exit('boom: unknown flag --tp')"
    crashing = pod("exits", image="testbed:0.1.0", command=["python", "-c", script])
    with running_plane(tmp_path) as h:
        h.core.create_namespaced_pod("default", crashing)
        wait_for(
            "CrashLoopBackOff",
            lambda: waiting_reason(h, "exits") == "CrashLoopBackOff",
            timeout_s=30,
        )
        [status] = status_of(h, "exits").container_statuses
        last = status.last_state.terminated
        assert (last.exit_code, last.reason) == (1, "Error")
        previous = h.core.read_namespaced_pod_log("exits", "default", previous=True)
        assert previous == "loading\nboom: unknown flag --tp\n"
        assert status_of(h, "exits").phase == "Running"


def test_oom_fault_is_oom_killed_with_137(tmp_path: Path) -> None:
    notes = {"emulator.testbed.io/fault": "oom", "emulator.testbed.io/fault-after": "0.2"}
    with running_plane(tmp_path) as h:
        h.core.create_namespaced_pod("default", pod("oom", notes=notes))

        def killed() -> object:
            [status] = status_of(h, "oom").container_statuses or [None]
            return status and status.last_state.terminated

        terminated = wait_for("OOMKilled", killed)
        assert (terminated.reason, terminated.exit_code) == ("OOMKilled", 137)


def test_a_process_over_its_memory_limit_is_oom_killed(tmp_path: Path) -> None:
    # 200 MiB, every page touched so it is resident, against a 64 MiB limit.
    script = "import time; b = b'x' * (200 << 20); time.sleep(60)"
    hog = pod(
        "hog",
        image="testbed:0.1.0",
        command=["python", "-c", script],
        resources={"limits": {"memory": "64Mi"}},
    )
    hog["spec"]["restartPolicy"] = "Never"
    with running_plane(tmp_path) as h:
        h.core.create_namespaced_pod("default", hog)
        wait_for("the pod to fail", lambda: status_of(h, "hog").phase == "Failed", timeout_s=30)
        terminated = status_of(h, "hog").container_statuses[0].state.terminated
        assert (terminated.reason, terminated.exit_code) == ("OOMKilled", 137)


@pytest.mark.timing
def test_slow_schedule_holds_the_binding_back(tmp_path: Path) -> None:
    notes = {
        "emulator.testbed.io/fault": "slow-schedule",
        "emulator.testbed.io/schedule-delay": "1.0",
    }
    with running_plane(tmp_path) as h:
        started = time.monotonic()
        h.core.create_namespaced_pod("default", pod("slow", notes=notes))
        h.core.create_namespaced_pod("default", pod("fast"))
        wait_for(
            "the fast pod to bind",
            lambda: h.core.read_namespaced_pod("fast", "default").spec.node_name,
        )
        assert not h.core.read_namespaced_pod("slow", "default").spec.node_name
        wait_for(
            "the slow pod to bind",
            lambda: h.core.read_namespaced_pod("slow", "default").spec.node_name,
        )
        assert time.monotonic() - started >= 1.0


def test_a_missing_secret_is_create_container_config_error(tmp_path: Path) -> None:
    env = [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "nope", "key": "token"}}}]
    with running_plane(tmp_path) as h:
        h.core.create_namespaced_pod("default", pod("config", env=env))
        wait_for(
            "the config error", lambda: waiting_reason(h, "config") == "CreateContainerConfigError"
        )
        message = status_of(h, "config").container_statuses[0].state.waiting.message
        assert message == 'secret "nope" not found'


def test_a_bad_fault_annotation_is_reported_not_ignored(tmp_path: Path) -> None:
    with running_plane(tmp_path) as h:
        h.core.create_namespaced_pod(
            "default", pod("typo", notes={"emulator.testbed.io/fault": "crsh"})
        )
        wait_for(
            "the config error", lambda: waiting_reason(h, "typo") == "CreateContainerConfigError"
        )
        message = status_of(h, "typo").container_statuses[0].state.waiting.message
        assert "'crsh' is not a fault" in message
