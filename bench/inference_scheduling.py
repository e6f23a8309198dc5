"""llm-d's inference-scheduling stack on the emulator, one namespace per endpoint picker.

Starts ``testbed cluster emulate --gateway-stand-in``, creates the published Gateway API and
GAIE CRDs once, then for each EPP configuration (random, load-aware, prefix-aware) a fresh
namespace with ``examples/stacks/inference-scheduling/`` rendered with the smoke preset's
values (four simulated vLLM pods), port-forwards to the Gateway's Service with kubectl, runs
``testbed load`` through it with the shared-prefix dataset and prints TTFT per picker. For
tuning the experiment without the campaign machinery; the campaign is
``examples/inference-scheduling.yaml``. Usage::

    .venv/bin/python bench/inference_scheduling.py [--requests 400] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from jinja2 import StrictUndefined
from jinja2.sandbox import SandboxedEnvironment

ROOT = Path(__file__).resolve().parent.parent
STACK = ROOT / "examples/stacks/inference-scheduling"
CAMPAIGN = ROOT / "examples/inference-scheduling.yaml"
PICKERS = ("random", "load-aware", "prefix-aware")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def smoke_values() -> tuple[dict[str, Any], dict[str, Any]]:
    """The stack values and load section the campaign's smoke preset gives."""
    campaign = yaml.safe_load(CAMPAIGN.read_text())
    values = dict(campaign["deployments"][0]["values"])
    load = dict(campaign["load"])
    smoke = campaign["presets"]["smoke"]
    for key, value in smoke.items():
        if key.startswith("deployments.scheduling.values."):
            values[key.rsplit(".", 1)[1]] = value
        elif key.startswith("load."):
            target = load
            parts = key.split(".")[1:]
            for part in parts[:-1]:
                target = target.setdefault(part, {})
            target[parts[-1]] = value
        elif key.startswith("deployments.scheduling."):
            continue  # not the stack's values (startup timeout)
    return values, load


def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if done.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def render(values: dict[str, Any], crds: bool) -> tuple[str, str]:
    """(CRD documents, the other documents) of the stack, as YAML streams."""
    env = SandboxedEnvironment(undefined=StrictUndefined)
    crd_docs: list[str] = []
    other: list[str] = []
    for path in sorted(STACK.rglob("*.yaml")):
        text = env.from_string(path.read_text()).render(**{**values, "install_crds": crds})
        for doc in yaml.safe_load_all(text):
            if doc:
                (crd_docs if doc["kind"] == "CustomResourceDefinition" else other).append(doc)
    return yaml.safe_dump_all(crd_docs), yaml.safe_dump_all(other)


def wait(what: str, check: Any, timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            got = check()
            if got:
                return got
        except RuntimeError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"timed out waiting for {what}")


def prefix_hit_ratio(port: int) -> float:
    """Prefix-cache hits / queries summed over the pool's pods (the gateway routes GET
    /metrics to some pod; asked until every pod answered once)."""
    import urllib.request

    seen: dict[str, tuple[float, float]] = {}
    for _ in range(60):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            pod = resp.headers.get("x-gateway-destination-endpoint", "")
            values = {}
            for line in resp.read().decode().splitlines():
                for name in ("vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"):
                    if line.startswith(name + "{"):
                        values[name] = float(line.rsplit(" ", 1)[1])
            seen[pod] = (
                values.get("vllm:prefix_cache_hits_total", 0.0),
                values.get("vllm:prefix_cache_queries_total", 0.0),
            )
    hits, queries = (sum(v[i] for v in seen.values()) for i in (0, 1))
    return hits / queries if queries else 0.0


def one_picker(
    kubeconfig: Path,
    values: dict[str, Any],
    load: dict[str, Any],
    picker: str,
    args: argparse.Namespace,
) -> dict[str, Any]:
    ns = f"sched-{picker}"
    kubectl(kubeconfig, "create", "namespace", ns)
    _, objects = render({**values, "epp_config": picker, "namespace": ns}, crds=False)
    kubectl(kubeconfig, "-n", ns, "create", "-f", "-", stdin=objects)
    wait(
        "the Gateway",
        lambda: (
            "True"
            in kubectl(
                kubeconfig,
                "-n",
                ns,
                "get",
                "gateway",
                "inference-gateway",
                "-o",
                "jsonpath={.status.conditions[?(@.type=='Programmed')].status}",
            )
        ),
    )
    wait(
        "the vLLM pods",
        lambda: (
            kubectl(
                kubeconfig,
                "-n",
                ns,
                "get",
                "deployment",
                "vllm-decode",
                "-o",
                "jsonpath={.status.readyReplicas}",
            ).strip()
            == str(values["replicas"])
        ),
    )
    port = free_port()
    forward = subprocess.Popen(
        ["kubectl", "--kubeconfig", str(kubeconfig), "-n", ns, "port-forward",
         "service/inference-gateway-gateway-stand-in", f"{port}:80"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        time.sleep(1.0)
        out = Path(tempfile.mkdtemp(prefix=f"bench-{picker}-"))
        dataset = load["dataset"]
        cmd = [sys.executable, "-m", "testbed", "load", f"http://127.0.0.1:{port}", "--json",
               "--no-plots", "--out", str(out),
               "--concurrency", str(args.concurrency or load["concurrency"]),
               "--requests", str(args.requests or load["requests"]),
               "--input-tokens", str(dataset["input_tokens"]),
               "--output-tokens", str(dataset["output_tokens"]),
               "--prefix-tokens", str(dataset["prefix_tokens"]),
               "--prefix-groups", str(dataset["prefix_groups"])]  # fmt: skip
        started = time.monotonic()
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode not in (0, 1):
            raise RuntimeError(f"testbed load: {done.stderr[-2000:]}")
        summary: dict[str, Any] = json.loads(done.stdout)
        summary["_wall_s"] = time.monotonic() - started
        summary["_hit_ratio"] = prefix_hit_ratio(port)
        return summary
    finally:
        os.killpg(forward.pid, signal.SIGTERM)
        forward.wait(10)
        kubectl(kubeconfig, "delete", "namespace", ns, "--wait=false")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int)
    parser.add_argument("--concurrency", type=int)
    parser.add_argument("--picker", action="append", choices=PICKERS)
    args = parser.parse_args()
    values, load = smoke_values()
    with tempfile.TemporaryDirectory(prefix="bench-sched-") as scratch:
        kubeconfig = Path(scratch) / "kubeconfig"
        emulator = subprocess.Popen(
            [sys.executable, "-m", "testbed", "cluster", "emulate", "--gateway-stand-in",
             "--port", "0", "--kubeconfig", str(kubeconfig), "--nodes", "2",
             "--gpus-per-node", "8"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )  # fmt: skip
        try:
            assert emulator.stdout is not None
            print(emulator.stdout.readline().strip())
            crds, _ = render({**values, "epp_config": "random", "namespace": "x"}, crds=True)
            kubectl(kubeconfig, "create", "-f", "-", stdin=crds)
            kubectl(
                kubeconfig, "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"
            )
            results = {
                p: one_picker(kubeconfig, values, load, p, args) for p in args.picker or PICKERS
            }
        finally:
            os.killpg(emulator.pid, signal.SIGTERM)
            emulator.wait(30)
    heads = ("TTFT p50", "TTFT p90", "TTFT p99")
    print(
        f"{'picker':<14}" + "".join(f"{h:>10}" for h in heads) + f"{'ITL p50':>9}{'req/s':>8}"
        f"{'cache hits':>11}"
    )
    for picker, s in results.items():
        t = s["ttft_ms"]
        print(f"{picker:<14}{t['p50']:>10.1f}{t['p90']:>10.1f}{t['p99']:>10.1f}{s['itl_ms']['p50']:>9.2f}"
              f"{s['throughput']['requests_per_s']:>8.1f}{s['_hit_ratio']:>11.0%}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
