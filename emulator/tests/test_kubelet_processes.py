"""Containers as host processes: environment, volumes, ports, logs, and their end.

Deletion and shutdown must leave no process behind: each test checks by pid.
"""

from __future__ import annotations

import base64
import json
import sys
import time
from pathlib import Path

import pytest
from kubernetes.client.exceptions import ApiException

from kubemu.testing import Harness, alive, running_plane, wait_for

pytestmark = [pytest.mark.kubernetes]

# Prints its environment and argv, writes a file into the mounted claim, then serves nothing.
SCRIPT = """
import os, sys, pathlib
print("TOKEN=" + os.environ["TOKEN"])
print("MODE=" + os.environ["MODE"])
print("POD=" + os.environ["POD"])
print("URL=" + os.environ["URL"])
print("ARGS=" + " ".join(sys.argv[1:]))
pathlib.Path(sys.argv[3]).write_text("weights")
print("done", flush=True)
"""

# Ignores SIGTERM and starts a grandchild that ignores it too: only SIGKILL of the group ends them.
STUBBORN = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
print(child.pid, flush=True)
time.sleep(600)
"""


def process_pod(name: str, script: str, grace: int = 30, **container: object) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": grace,
            "containers": [
                {
                    "name": "main",
                    "image": "quay.io/acme/testbed:dev",
                    "command": ["python", "-c", script],
                    **container,
                }
            ],
        },
    }


def log_of(h: Harness, name: str, **kw: object) -> str:
    return h.core.read_namespaced_pod_log(name, "default", **kw)


def test_env_volumes_and_ports_are_moved_onto_the_host(tmp_path: Path) -> None:
    secret = {
        "metadata": {"name": "creds"},
        "data": {"token": base64.b64encode(b"s3cr3t").decode()},
    }
    config = {"metadata": {"name": "settings"}, "data": {"mode": "fast"}}
    claim = {
        "metadata": {"name": "models"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    env = [
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
        {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "mode"}}},
        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "URL", "value": "http://0.0.0.0:8000/v1"},
    ]
    pod = process_pod(
        "env",
        SCRIPT,
        args=["--port", "8000", "/models/out.txt", "$(MODE)"],
        env=env,
        ports=[{"containerPort": 8000}],
        volumeMounts=[{"name": "m", "mountPath": "/models"}],
    )
    pod["spec"]["volumes"] = [{"name": "m", "persistentVolumeClaim": {"claimName": "models"}}]
    pod["spec"]["restartPolicy"] = "Never"
    with running_plane(tmp_path) as h:
        h.core.create_namespaced_secret("default", secret)
        h.core.create_namespaced_config_map("default", config)
        h.core.create_namespaced_persistent_volume_claim("default", claim)
        h.core.create_namespaced_pod("default", pod)
        wait_for(
            "the pod to succeed",
            lambda: h.core.read_namespaced_pod("env", "default").status.phase == "Succeeded",
        )
        host_port = h.call(lambda: h.plane.kubelet.runtime("default", "env").ports[8000])
        claim_dir = tmp_path / "state" / "pvc" / "default" / "models"
        lines = log_of(h, "env").splitlines()
        assert lines == [
            "TOKEN=s3cr3t",
            "MODE=fast",
            "POD=env",
            f"URL=http://127.0.0.1:{host_port}/v1",
            f"ARGS=--port {host_port} {claim_dir}/out.txt fast",
            "done",
        ]
        assert (claim_dir / "out.txt").read_text() == "weights"
        assert host_port != 8000
        stamped = log_of(h, "env", timestamps=True, tail_lines=1)
        stamp, _, text = stamped.strip().partition(" ")
        assert text == "done"
        assert stamp.endswith("Z")
        assert len(stamp) == len("2026-11-23T20:45:01.123456789Z")


@pytest.mark.timing
def test_deletion_sigterms_then_sigkills_the_whole_group(tmp_path: Path) -> None:
    with running_plane(tmp_path) as h:
        h.core.create_namespaced_pod("default", process_pod("stubborn", STUBBORN, grace=1))
        child = int(
            wait_for(
                "the child's pid",
                lambda: log_of(h, "stubborn").strip() if _running(h, "stubborn") else "",
            )
        )
        leader = h.call(lambda: h.plane.kubelet.runtime("default", "stubborn").runners[0].host.pid)
        assert alive(leader)
        assert alive(child)
        started = time.monotonic()
        h.core.delete_namespaced_pod("stubborn", "default")
        assert h.core.read_namespaced_pod("stubborn", "default").metadata.deletion_timestamp
        wait_for(
            "the pod to go", lambda: not h.core.list_namespaced_pod("default").items, timeout_s=15
        )
        assert time.monotonic() - started >= 1.0  # it waited the grace period before SIGKILL
        wait_for("no process", lambda: not alive(leader) and not alive(child), timeout_s=5)
        events = h.core.list_namespaced_event(
            "default", field_selector="involvedObject.name=stubborn"
        ).items
        assert "Stopping container main" in [e.message for e in events if e.reason == "Killing"]


def test_stopping_the_emulator_leaves_no_process(tmp_path: Path) -> None:
    with running_plane(tmp_path, grace_s=0.5) as h:
        h.core.create_namespaced_pod("default", process_pod("stubborn", STUBBORN, grace=30))
        child = int(
            wait_for(
                "the child's pid",
                lambda: log_of(h, "stubborn").strip() if _running(h, "stubborn") else "",
            )
        )
        leader = h.call(lambda: h.plane.kubelet.runtime("default", "stubborn").runners[0].host.pid)
    wait_for("no process", lambda: not alive(leader) and not alive(child), timeout_s=5)


def test_the_emulator_dying_takes_its_containers_along(tmp_path: Path) -> None:
    """SIGKILL of the emulator's process: the shim ends the container and its grandchild."""
    import subprocess

    code = f"""
import asyncio, sys
sys.path[:0] = {sys.path!r}
from pathlib import Path
from kubemu import Emulator, ClusterShape
from kubemu import attach, PlaneSettings
STUBBORN = {STUBBORN!r}
pod = {process_pod("stubborn", STUBBORN)!r}
async def main():
    emulator = Emulator(ClusterShape(nodes=1))
    await emulator.start()
    plane = attach(emulator, PlaneSettings(state_dir=Path({str(tmp_path)!r})))
    emulator.store.create("pods", pod, "default")
    while not plane.logbook.find("default", "stubborn", "main", False) or not (
        plane.logbook.find("default", "stubborn", "main", False).lines()
    ):
        await asyncio.sleep(0.05)
    runtime = plane.kubelet.runtime("default", "stubborn")
    grandchild = plane.logbook.find("default", "stubborn", "main", False).lines()[0][1]
    print(runtime.runners[0].host.pid, grandchild, flush=True)
    await asyncio.sleep(600)
asyncio.run(main())
"""
    emulator = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert emulator.stdout is not None
        pids = [int(p) for p in emulator.stdout.readline().split()]
        assert len(pids) == 2
        assert all(alive(pid) for pid in pids)
    finally:
        emulator.kill()
        emulator.wait()
        if emulator.stdout is not None:
            emulator.stdout.close()
    wait_for(
        "the container to die with the emulator",
        lambda: not any(alive(p) for p in pids),
        timeout_s=5,
    )


def _running(h: Harness, name: str) -> bool:
    return h.core.read_namespaced_pod(name, "default").status.phase == "Running"


def test_init_containers_run_first_and_share_an_empty_dir(tmp_path: Path) -> None:
    write = (
        "import sys, pathlib; pathlib.Path(sys.argv[1]).write_text('fetched'); print('init done')"
    )
    read = "import sys, pathlib; print(pathlib.Path(sys.argv[1]).read_text(), flush=True)"
    pod = {
        "metadata": {"name": "init"},
        "spec": {
            "restartPolicy": "Never",
            "volumes": [{"name": "scratch", "emptyDir": {}}],
            "initContainers": [
                {
                    "name": "fetch",
                    "image": "testbed:1",
                    "command": ["python", "-c", write, "/models/weights.txt"],
                    "volumeMounts": [{"name": "scratch", "mountPath": "/models"}],
                }
            ],
            "containers": [
                {
                    "name": "main",
                    "image": "testbed:1",
                    "command": ["python", "-c", read],
                    "args": ["/data/weights.txt"],
                    "volumeMounts": [{"name": "scratch", "mountPath": "/data"}],
                }
            ],
        },
    }
    with running_plane(tmp_path) as h:
        h.core.create_namespaced_pod("default", pod)
        wait_for(
            "the pod to succeed",
            lambda: h.core.read_namespaced_pod("init", "default").status.phase == "Succeeded",
        )
        done = h.core.read_namespaced_pod("init", "default")
        assert log_of(h, "init", container="fetch") == "init done\n"
        assert log_of(h, "init", container="main") == "fetched\n"
        conditions = {c.type: c.status for c in done.status.conditions}
        assert conditions["Initialized"] == "True"
        assert conditions["Ready"] == "False"
        [init] = done.status.init_container_statuses
        assert init.state.terminated.reason == "Completed"
        main_started = done.status.container_statuses[0].state.terminated.started_at
        assert main_started >= init.state.terminated.finished_at
        with pytest.raises(ApiException) as refused:
            log_of(h, "init", container="nope")
        assert refused.value.status == 400
        assert (
            json.loads(refused.value.body)["message"] == "container nope is not valid for pod init"
        )
        assert log_of(h, "init") == "fetched\n"  # one app container: no name needed


def test_a_failing_liveness_probe_restarts_the_container(tmp_path: Path) -> None:
    probe = {"tcpSocket": {"port": 8000}, "periodSeconds": 1, "failureThreshold": 1}
    pod = process_pod(
        "dead",
        "import time; print('up', flush=True); time.sleep(600)",
        grace=1,
        ports=[{"containerPort": 8000}],
        livenessProbe=probe,
    )
    with running_plane(tmp_path) as h:
        h.core.create_namespaced_pod("default", pod)

        def restarted() -> object:
            statuses = h.core.read_namespaced_pod("dead", "default").status.container_statuses or []
            return statuses and statuses[0].restart_count >= 1 and statuses[0]

        status = wait_for("a restart", restarted, timeout_s=30)
        assert status.last_state.terminated.exit_code == 143  # SIGTERM, as a kubelet's kill
        events = h.core.list_namespaced_event(
            "default", field_selector="involvedObject.name=dead"
        ).items
        notes = {(e.reason, e.message) for e in events}
        assert ("Killing", "Container main failed liveness probe, will be restarted") in notes
        assert any(
            reason == "Unhealthy" and "Liveness probe failed" in note for reason, note in notes
        )


def test_follow_streams_lines_until_the_container_ends(tmp_path: Path) -> None:
    script = (
        "import time\nfor i in range(3):\n    print(f'line {i}', flush=True)\n    time.sleep(0.3)"
    )
    pod = process_pod("talk", script)
    pod["spec"]["restartPolicy"] = "Never"
    with running_plane(tmp_path) as h:
        h.core.create_namespaced_pod("default", pod)
        wait_for(
            "the container to start",
            lambda: h.core.read_namespaced_pod("talk", "default").status.phase != "Pending",
        )
        stream = h.core.read_namespaced_pod_log(
            "talk", "default", follow=True, _preload_content=False
        )
        try:
            body = b"".join(stream.stream(64))
        finally:
            stream.release_conn()
        assert body.decode() == "line 0\nline 1\nline 2\n"
        assert h.core.read_namespaced_pod("talk", "default").status.phase == "Succeeded"


def test_a_startup_probe_gates_readiness_and_restarts_a_server_that_never_starts(
    tmp_path: Path,
) -> None:
    probe = {"tcpSocket": {"port": 8000}, "periodSeconds": 1, "failureThreshold": 2}
    pod = process_pod(
        "never",
        "import time; time.sleep(600)",
        grace=1,
        ports=[{"containerPort": 8000}],
        startupProbe=probe,
        livenessProbe={"tcpSocket": {"port": 8000}, "periodSeconds": 1, "failureThreshold": 1},
    )
    with running_plane(tmp_path) as h:
        h.core.create_namespaced_pod("default", pod)
        running = wait_for(
            "the container to run",
            lambda: (
                (s := h.core.read_namespaced_pod("never", "default").status.container_statuses)
                and s[0].state.running
                and s[0]
            ),
        )
        assert running.started is False
        assert running.ready is False

        def restarted() -> object:
            statuses = (
                h.core.read_namespaced_pod("never", "default").status.container_statuses or []
            )
            return statuses and statuses[0].restart_count >= 1

        wait_for("a restart", restarted, timeout_s=30)
        events = h.core.list_namespaced_event(
            "default", field_selector="involvedObject.name=never"
        ).items
        notes = {(e.reason, e.message) for e in events}
        assert ("Killing", "Container main failed startup probe, will be restarted") in notes
        assert not any("Liveness" in note for _, note in notes)  # liveness waits for startup
