"""A Deployment of `testbed serve sim` on the emulator: Ready, served through port-forward,
logged, and gone with its processes when deleted (official client throughout)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from kubernetes.stream import portforward

from kubemu.testing import Harness, running_plane, wait_for

pytestmark = [pytest.mark.kubernetes, pytest.mark.slow]


def sim_deployment(name: str) -> dict:
    container = {
        "name": "server",
        "image": "registry.example/testbed:0.1.0",
        "command": ["testbed"],
        "args": ["serve", "sim", "--port", "8000", "--host", "0.0.0.0"],
        "ports": [{"name": "http", "containerPort": 8000}],
        "readinessProbe": {"httpGet": {"path": "/health", "port": 8000}, "periodSeconds": 1},
        # As the kubernetes backend writes them: startup gates liveness while the server loads.
        "startupProbe": {
            "httpGet": {"path": "/health", "port": "http"},
            "periodSeconds": 1,
            "failureThreshold": 60,
        },
        "livenessProbe": {"httpGet": {"path": "/health", "port": 8000}, "periodSeconds": 1},
    }
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }


def forwarded(
    h: Harness, pod: str, method: str, path: str, body: dict | None = None
) -> tuple[int, bytes]:
    """One HTTP request to the pod's port 8000 through kubernetes.stream.portforward."""
    forward = portforward(
        h.core.connect_get_namespaced_pod_portforward, pod, "default", ports="8000"
    )
    try:
        return http_over(forward.socket(8000), method, path, body)
    finally:
        # The client's proxy thread leaves its websocket open when the server ends the stream
        # (as the real kubelet does once the pod's connection closes): close it here.
        forward.websocket.shutdown()


def http_over(sock: Any, method: str, path: str, body: dict | None = None) -> tuple[int, bytes]:
    payload = json.dumps(body).encode() if body is not None else b""
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: pod\r\nConnection: close\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
    )
    data = b""
    try:
        sock.sendall(head.encode() + payload)
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    finally:
        sock.close()
    status_line, _, rest = data.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


def ready_pod(h: Harness, selector: str) -> object:
    def check() -> object:
        pods = h.core.list_namespaced_pod("default", label_selector=selector).items
        ready = [
            p
            for p in pods
            if any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
        ]
        return ready[0] if ready else None

    return wait_for("a Ready pod", check, timeout_s=60)


def pids_of(h: Harness, namespace: str, name: str) -> list[int]:
    def read() -> list[int]:
        runtime = h.plane.kubelet.runtime(namespace, name)
        if runtime is None:
            return []
        return [r.host.pid for r in runtime.runners if r.host is not None]

    return h.call(read)


def alive(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_sim_deployment_becomes_ready_serves_through_port_forward_and_stops(
    tmp_path: Path,
) -> None:
    with running_plane(tmp_path) as h:
        h.apps.create_namespaced_deployment("default", sim_deployment("sim"))
        pod = ready_pod(h, "app=sim")
        name = pod.metadata.name
        assert pod.status.phase == "Running"
        assert pod.spec.node_name.startswith("emu-node-")
        assert pod.metadata.labels["pod-template-hash"]
        [status] = pod.status.container_statuses
        assert status.ready
        assert status.started
        assert status.state.running is not None
        assert status.restart_count == 0
        pids = pids_of(h, "default", name)
        assert len(pids) == 1
        assert alive(pids[0])

        code, body = forwarded(h, name, "GET", "/v1/models")
        assert code == 200, body
        assert json.loads(body)["data"]
        request = {"model": json.loads(body)["data"][0]["id"], "prompt": "hello", "max_tokens": 5}
        code, body = forwarded(h, name, "POST", "/v1/completions", request)
        assert code == 200, body
        assert json.loads(body)["usage"]["completion_tokens"] == 5

        deployment = wait_for(
            "Deployment Available",
            lambda: (
                (d := h.apps.read_namespaced_deployment("sim", "default")).status.available_replicas
                == 1
                and d
            ),
        )
        conditions = {c.type: c for c in deployment.status.conditions}
        assert conditions["Available"].status == "True"
        assert conditions["Progressing"].reason == "NewReplicaSetAvailable"
        assert deployment.status.observed_generation == 1

        log = h.core.read_namespaced_pod_log(name, "default", container="server")
        assert "GET /v1/models" in log or log.strip(), log

        h.apps.delete_namespaced_deployment("sim", "default")
        wait_for("the pods to go", lambda: not h.core.list_namespaced_pod("default").items)
        assert not any(alive(pid) for pid in pids)
