"""Throughput of the emulator's port-forward paths against the pod's port itself.

Starts ``testbed cluster emulate``, runs a pod serving a SIZE-MB file (Python's http.server),
and downloads it ROUNDS times each way, alternating: straight from the host port the kubelet
gave the container (the baseline), through ``kubectl port-forward`` (SPDY/3.1 tunnelled in a
websocket), and through testbed's bridge (``kubernetes.stream.portforward``, as the kubernetes
backend reaches servers). Prints MB/s (median, min, max) and each path's ratio to the baseline.

    PYTHONPATH=$PWD/src .venv/bin/python bench/emulator_port_forward.py [--size-mb 50] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kubernetes_provision import start_emulator

SERVE = (
    "import os, sys, http.server\n"
    "open('big', 'wb').write(os.urandom(int(sys.argv[2]) * 1_000_000))\n"
    "http.server.test(HandlerClass=http.server.SimpleHTTPRequestHandler,"
    " port=int(sys.argv[1]), bind='127.0.0.1')\n"
)


def download(port: int) -> float:
    """Seconds to fetch /big from 127.0.0.1:port."""
    start = time.perf_counter()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/big", timeout=120) as response:
        while response.read(1 << 20):
            pass
    return time.perf_counter() - start


def kubectl_forward(kubeconfig: Path) -> tuple[subprocess.Popen[str], int]:
    forward = subprocess.Popen(
        ["kubectl", f"--kubeconfig={kubeconfig}", "port-forward", "pod/files", ":8000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert forward.stdout is not None
    match = re.search(r"127\.0\.0\.1:(\d+)", forward.stdout.readline())
    assert match, "kubectl port-forward did not start"
    return forward, int(match.group(1))


async def bridged(kubeconfig: Path, rounds: int) -> list[float]:
    from testbed.clients.kube import ConnectionSpec, PortForward, connect

    api = connect(ConnectionSpec(kubeconfig=str(kubeconfig)))
    try:
        async with PortForward(api, "default", "files", 8000) as local:
            return [await asyncio.to_thread(download, local) for _ in range(rounds)]
    finally:
        api.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from kubernetes import client, config

    with tempfile.TemporaryDirectory() as folder:
        emulator, kubeconfig = start_emulator(Path(folder))
        try:
            api = config.new_client_from_config(str(kubeconfig))  # type: ignore[no-untyped-call]
            core = client.CoreV1Api(api)
            container = {
                "name": "web",
                "image": "quay.io/acme/testbed:dev",
                "command": ["python", "-c", SERVE, "8000", str(args.size_mb)],
                "ports": [{"containerPort": 8000}],
                "readinessProbe": {"tcpSocket": {"port": 8000}, "periodSeconds": 1},
            }
            pod_body = {"metadata": {"name": "files"}, "spec": {"containers": [container]}}
            core.create_namespaced_pod("default", pod_body)  # type: ignore[arg-type]
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                pod = core.read_namespaced_pod("files", "default")
                if any(
                    c.type == "Ready" and c.status == "True"
                    for c in (pod.status and pod.status.conditions) or []
                ):
                    break
                time.sleep(0.2)
            # The container's port on this host: the kubelet rewrote 8000 in its argv.
            argv = Path(f"/proc/{_server_pid()}/cmdline").read_bytes().split(b"\0")
            host_port = int(argv[-3])
            forward, kubectl_port = kubectl_forward(kubeconfig)
            times: dict[str, list[float]] = {"pod port (baseline)": [], "kubectl port-forward": []}
            try:
                for _ in range(args.rounds):
                    times["pod port (baseline)"].append(download(host_port))
                    times["kubectl port-forward"].append(download(kubectl_port))
            finally:
                forward.kill()
                forward.wait()
            times["testbed bridge (python client)"] = asyncio.run(bridged(kubeconfig, args.rounds))
        finally:
            emulator.terminate()
            emulator.wait(30)
    base = statistics.median(args.size_mb / t for t in times["pod port (baseline)"])
    print(f"{args.size_mb} MB x {args.rounds} rounds")
    print(f"{'path':34} {'MB/s median':>12} {'min':>8} {'max':>8} {'x baseline':>11}")
    for name, seconds in times.items():
        rates = [args.size_mb / t for t in seconds]
        median = statistics.median(rates)
        print(f"{name:34} {median:12.1f} {min(rates):8.1f} {max(rates):8.1f} {median / base:11.2f}")


def _server_pid() -> int:
    """The http.server the kubelet started (its argv ends with the port and the size)."""
    found = subprocess.run(
        ["pgrep", "-f", "http.server.test"], capture_output=True, text=True, check=False
    ).stdout.split()
    return int(found[-1])


if __name__ == "__main__":
    main()
