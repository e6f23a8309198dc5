"""What the Kubernetes backend adds around a worker: provision, first request, release.

Starts ``testbed cluster emulate`` (or uses ``$KUBECONFIG``'s cluster with ``--real``), then
WORKERS times: provisions one simulator worker through ``KubernetesBackend`` (apply the
Deployment and Service, watch its pod until Ready, open the port-forward bridge), sends
REQUESTS sequential ``/v1/models`` requests through the bridge, and leaves (delete the
worker's objects); finally the run's cleanup (delete by label, delete the namespace, wait
until the API has none left). Prints the median and worst of each step, in milliseconds.
The emulator's kubelet starts a real ``testbed serve sim`` process per pod, so "ready"
includes that process's start (~1-2 s of Python imports on a busy 2-core machine).

    PYTHONPATH=$PWD/src .venv/bin/python bench/kubernetes_provision.py [--workers 10]
        [--requests 50] [--real] [--stack]

``--stack`` provisions the same simulator as a stack (``server: manifests``) instead, to
show what the stack machinery (discovery, journal, condition watch, Service lookup) costs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from testbed.config.deployments import AnyDeployment, deployment_model

ROOT = Path(__file__).resolve().parents[1]


def start_emulator(folder: Path) -> tuple[subprocess.Popen[bytes], Path]:
    kubeconfig = folder / "kubeconfig"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    command = [sys.executable, "-m", "testbed", "cluster", "emulate", "--port", "0"]
    command += ["--kubeconfig", str(kubeconfig), "--nodes", "2"]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, start_new_session=True
    )
    assert process.stdout is not None
    line = process.stdout.readline().decode()
    if not re.search("kubeconfig written", line):
        raise SystemExit(f"emulator did not start: {line}")
    return process, kubeconfig


async def http_get(port: int, path: str) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    status = int((await reader.readline()).split()[1])
    await reader.read()
    writer.close()
    return status


def stack_deployment() -> AnyDeployment:
    """The Helm-output example's stack (a Deployment + Service of the simulator, plus a
    ServiceAccount and a ConfigMap), resolved as the plan resolves it."""
    return deployment_model(
        {
            "name": "sim",
            "server": "manifests",
            "manifests": str(ROOT / "examples/stacks/helm-sim/rendered.yaml"),
            "templated": False,
            "model": "llm",
            "ready": [{"kind": "Deployment", "name": "llm-sim-server", "condition": "Available"}],
            "endpoint": {"service": "llm-sim-server", "port": "http"},
            "startup_timeout_s": 60,
        }
    )


async def measure(workers: int, requests: int, out: Path, stack: bool) -> dict[str, list[float]]:
    from testbed.backends.kubernetes import KubernetesBackend
    from testbed.config.backend_settings import KubernetesSettings

    deployment = stack_deployment() if stack else deployment_model({
        "name": "sim",
        "server": "sim",
        "model": "sim-model",
        "params": {},
        "resources": {"cpu": 0.1, "memory_gb": 0.25, "gpu": 0},
        "startup_timeout_s": 60,
    })  # fmt: skip
    backend = KubernetesBackend(out / "bench-provision", KubernetesSettings(kind="kubernetes"))
    times: dict[str, list[float]] = {"ready": [], "request": [], "release": [], "cleanup": []}
    await backend.prepare([deployment])
    for i in range(workers):
        start = time.perf_counter()
        context = backend.provision(f"sim-{i}", deployment, out / f"w{i}")
        handle = await context.__aenter__()
        times["ready"].append(time.perf_counter() - start)
        port = int(handle.endpoint.base_url.rsplit(":", 1)[1])
        for _ in range(requests):
            sent = time.perf_counter()
            assert await http_get(port, "/v1/models") == 200
            times["request"].append(time.perf_counter() - sent)
        start = time.perf_counter()
        await context.__aexit__(None, None, None)
        times["release"].append(time.perf_counter() - start)
    start = time.perf_counter()
    await backend.cleanup_leftovers(out)
    times["cleanup"].append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=10)
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--real", action="store_true", help="use $KUBECONFIG's cluster")
    parser.add_argument(
        "--stack",
        action="store_true",
        help="provision the worker as a stack (server: manifests, examples/stack-helm.yaml's"
        " rendered chart: apply 4 objects, watch the Deployment's Available, port-forward"
        " through its Service, delete in reverse order and wait until gone)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        emulator = None
        if not args.real:
            emulator, kubeconfig = start_emulator(folder)
            os.environ["KUBECONFIG"] = str(kubeconfig)
        try:
            times = asyncio.run(measure(args.workers, args.requests, folder, args.stack))
        finally:
            if emulator is not None:
                os.killpg(emulator.pid, signal.SIGTERM)
                emulator.wait(timeout=30)
    kind = "stack (server: manifests)" if args.stack else "sim"
    print(f"{args.workers} {kind} workers, {args.requests} requests each through the port-forward")
    print(f"{'step':<10} {'n':>5} {'median ms':>10} {'max ms':>10}")
    for step, values in times.items():
        ms = [v * 1000 for v in values]
        print(f"{step:<10} {len(ms):>5} {statistics.median(ms):>10.1f} {max(ms):>10.1f}")


if __name__ == "__main__":
    main()
