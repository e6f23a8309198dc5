"""The process-kubelet's Service environment variables and ``$(VAR)`` expansion, as the
real kubelet does them (pointed at 127.0.0.1 and a ready backing pod's host port), and
stdout and stderr kept apart line by line, as CRI logs are."""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any

import pytest

from kubemu.kubelet.environment import resolve_env
from kubemu.kubelet.services import service_env
from kubemu.testing import running_plane, wait_for, wait_ready

pytestmark = [pytest.mark.kubernetes]

WEB = {"app": "web"}


def ready_pod(name: str, labels: dict[str, str], ready: bool = True) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "labels": labels},
        "spec": {"containers": [{"name": "c", "ports": [{"name": "http", "containerPort": 8000}]}]},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def service(name: str, **spec: Any) -> dict[str, Any]:
    body = {"selector": WEB, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": {**body, **spec}}


def ports(namespace: str, name: str) -> dict[int, int]:
    return {8000: 41001} if (namespace, name) == ("ns", "web-1") else {}


def test_variables_follow_the_kubelets_names_and_point_at_the_host_port() -> None:
    env = service_env([service("web-api")], [ready_pod("web-1", WEB)], ports)
    assert env == {
        "WEB_API_SERVICE_HOST": "127.0.0.1",
        "WEB_API_SERVICE_PORT": "41001",
        "WEB_API_SERVICE_PORT_HTTP": "41001",
        "WEB_API_PORT": "tcp://127.0.0.1:41001",
        "WEB_API_PORT_80_TCP": "tcp://127.0.0.1:41001",
        "WEB_API_PORT_80_TCP_PROTO": "tcp",
        "WEB_API_PORT_80_TCP_PORT": "41001",
        "WEB_API_PORT_80_TCP_ADDR": "127.0.0.1",
    }
    numeric = service("web-num", ports=[{"port": 81, "targetPort": 8000}])
    assert service_env([numeric], [ready_pod("web-1", WEB)], ports)["WEB_NUM_SERVICE_PORT"] == (
        "41001"
    )


@pytest.mark.parametrize(
    ("services", "pods"),
    [
        ([service("web", clusterIP="None")], [ready_pod("web-1", WEB)]),  # headless
        ([service("web")], [ready_pod("web-1", WEB, ready=False)]),  # no ready backing pod
        ([service("web")], [ready_pod("web-1", {"app": "other"})]),  # the selector misses
        ([service("web", selector={})], [ready_pod("web-1", WEB)]),  # no selector
    ],
    ids=["headless", "not-ready", "no-match", "no-selector"],
)
def test_services_that_lead_nowhere_get_no_variables(
    services: list[dict[str, Any]], pods: list[dict[str, Any]]
) -> None:
    assert service_env(services, pods, ports) == {}


def test_the_containers_own_env_wins_and_sees_the_service_variables() -> None:
    container = {
        "env": [
            {"name": "WEB_SERVICE_HOST", "value": "mine"},
            {"name": "URL", "value": "http://$(WEB_SERVICE_PORT_HTTP)/$$(KEPT)/$(MISSING)"},
        ]
    }
    services = {"WEB_SERVICE_HOST": "127.0.0.1", "WEB_SERVICE_PORT_HTTP": "41001"}
    env = resolve_env(container, {"metadata": {"namespace": "ns"}}, lambda *_: None, services)
    assert env["WEB_SERVICE_HOST"] == "mine"
    assert env["WEB_SERVICE_PORT_HTTP"] == "41001"
    assert env["URL"] == "http://41001/$(KEPT)/$(MISSING)"


def answers(url: str) -> bool:
    try:
        return bool(urllib.request.urlopen(url, timeout=2).read() == b"served")
    except OSError:
        return False


CLIENT = """
import os, sys, urllib.request
print("HOST=" + os.environ["WEB_API_SERVICE_HOST"])
print("PORT=" + os.environ["WEB_API_SERVICE_PORT_HTTP"])
print("ARGS=" + " ".join(sys.argv[1:]))
print("BODY=" + urllib.request.urlopen(sys.argv[1], timeout=10).read().decode().strip())
print("OTHER=" + str("OTHER_SERVICE_HOST" in os.environ))
"""


def test_a_pod_reaches_a_service_through_its_variables(tmp_path: Path) -> None:
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "index.txt").write_text("served")
    server = {
        "metadata": {"name": "web-1", "labels": WEB},
        "spec": {
            "containers": [
                {
                    "name": "web",
                    "image": "quay.io/acme/testbed:dev",
                    "command": ["python", "-m", "http.server", "8000", "--bind", "0.0.0.0"],
                    "args": ["--directory", str(tmp_path / "www")],
                    "ports": [{"name": "http", "containerPort": 8000}],
                }
            ]
        },
    }
    client = {
        "metadata": {"name": "client"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "c",
                    "image": "quay.io/acme/testbed:dev",
                    "command": ["python", "-c", CLIENT],
                    "args": [
                        "http://$(WEB_API_SERVICE_HOST):$(WEB_API_SERVICE_PORT_HTTP)/index.txt",
                        "$$(WEB_API_SERVICE_HOST)",
                    ],
                }
            ],
        },
    }
    other = {"metadata": {"name": "other"}, "spec": {"selector": {"app": "none"},
             "ports": [{"port": 80}]}}  # fmt: skip
    with running_plane(tmp_path) as h:
        h.core.create_namespaced_pod("default", server)
        h.core.create_namespaced_service(
            "default", service("web-api") | {"metadata": {"name": "web-api"}}
        )
        h.core.create_namespaced_service("default", other)
        wait_ready(h, "web-1")
        host_port = h.call(lambda: h.plane.kubelet.runtime("default", "web-1").ports[8000])
        # the server listens where the variables will say, on loopback
        wait_for("the server to answer", lambda: answers(f"http://127.0.0.1:{host_port}/index.txt"))
        h.core.create_namespaced_pod("default", client)
        wait_for(
            "the client to end",
            lambda: (
                h.core.read_namespaced_pod("client", "default").status.phase
                in ("Succeeded", "Failed")
            ),
        )
        log = h.core.read_namespaced_pod_log("client", "default")
        assert h.core.read_namespaced_pod("client", "default").status.phase == "Succeeded", log
    assert log.splitlines() == [
        "HOST=127.0.0.1",
        f"PORT={host_port}",
        f"ARGS=http://127.0.0.1:{host_port}/index.txt $(WEB_API_SERVICE_HOST)",
        "BODY=served",
        "OTHER=False",  # its only pod does not exist: no variables
    ]


NOISY = """
import sys, threading
big = "x" * 300_000
def noise():
    for i in range(2000):
        sys.stderr.write(f"noise {i}\\n"); sys.stderr.flush()
t = threading.Thread(target=noise); t.start()
for i in range(20):
    sys.stdout.write(f"{i}:" + big + "\\n"); sys.stdout.flush()
t.join()
"""


def test_stdout_and_stderr_lines_never_mix(tmp_path: Path) -> None:
    pod = {
        "metadata": {"name": "noisy"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "c",
                    "image": "quay.io/acme/testbed:dev",
                    "command": ["python", "-c", NOISY],
                }
            ],
        },
    }
    with running_plane(tmp_path) as h:
        h.core.create_namespaced_pod("default", pod)
        wait_for(
            "the pod to succeed",
            lambda: h.core.read_namespaced_pod("noisy", "default").status.phase == "Succeeded",
        )
        lines = h.core.read_namespaced_pod_log("noisy", "default").splitlines()
    big = [line for line in lines if not line.startswith("noise ")]
    assert big == [f"{i}:" + "x" * 300_000 for i in range(20)]
    assert sorted(int(line.split()[1]) for line in lines if line.startswith("noise ")) == list(
        range(2000)
    )
