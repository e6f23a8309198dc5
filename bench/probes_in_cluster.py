"""Probes from the controller (port-forward) vs probes in the cluster (a Job next to the
server), on the emulator: the same simulator load test both ways, its throughput and
latency as each probe saw them.

    PYTHONPATH=src python bench/probes_in_cluster.py [--requests 400] [--concurrency 16]

Starts a private ``testbed cluster emulate``, runs one concurrency load test against a
zero-latency simulator with ``backend.probes: controller`` then ``cluster``, and prints
req/s, output tok/s and TTFT / e2e percentiles from each run's summary. On the emulator the
port-forward is a websocket through the emulated API server per connection, as a real
cluster's is through the kube-apiserver and kubelet; the Job reaches the Service directly.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

SRC = Path(__file__).resolve().parents[1] / "src"


def campaign(requests: int, concurrency: int) -> dict[str, Any]:
    return {
        "name": "pf-vs-job",
        "backend": {"kind": "kubernetes", "ready_timeout_s": 120},
        "deployments": [
            {
                "name": "sim",
                "server": "sim",
                "params": {"ttft_ms": 0, "itl_ms": 0, "max_concurrency": 256},
            }
        ],
        "load": {
            "profile": "concurrency",
            "concurrency": concurrency,
            "requests": requests,
            "duration_s": 600,
            "warmup_s": 0,
            "dataset": {"kind": "synthetic", "input_tokens": 64, "output_tokens": 32},
        },
        "execution": {"retries": 0},
    }


def start_emulator(folder: Path) -> tuple[subprocess.Popen[bytes], Path]:
    kubeconfig = folder / "kubeconfig"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    command = [sys.executable, "-m", "testbed", "cluster", "emulate", "--port", "0",
               "--kubeconfig", str(kubeconfig), "--state-dir", str(folder / "state")]  # fmt: skip
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, start_new_session=True)
    assert process.stdout is not None
    line = process.stdout.readline().decode()
    if not re.search(r"kubeconfig written to", line):
        raise SystemExit(f"the emulator did not start: {line}")
    return process, kubeconfig


def run(folder: Path, kubeconfig: Path, probes: str, data: dict[str, Any]) -> dict[str, Any]:
    path = folder / f"{probes}.yaml"
    data = {**data, "backend": {**data["backend"], "probes": probes}}
    path.write_text(yaml.safe_dump(data))
    out = folder / f"run-{probes}"
    env = {**os.environ, "PYTHONPATH": str(SRC), "KUBECONFIG": str(kubeconfig)}
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "testbed", "run", str(path), "--out", str(out)],
        env=env, capture_output=True, text=True, timeout=1200, check=False,
    )  # fmt: skip
    if result.returncode not in (0, 1):
        raise SystemExit(f"{probes}: exit {result.returncode}\n{result.stdout}{result.stderr}")
    (summary_path,) = out.glob("001__*/summary.json")
    summary: dict[str, Any] = json.loads(summary_path.read_text())
    summary["wall_s"] = time.monotonic() - started
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    data = campaign(args.requests, args.concurrency)
    with tempfile.TemporaryDirectory(prefix="bench-probes-") as tmp:
        folder = Path(tmp)
        emulator, kubeconfig = start_emulator(folder)
        try:
            rows = {p: run(folder, kubeconfig, p, data) for p in ("controller", "cluster")}
        finally:
            emulator.send_signal(signal.SIGTERM)
            emulator.wait(timeout=60)
    print(f"simulator (0 ms), {args.requests} requests at concurrency {args.concurrency},"
          " 64 in / 32 out tokens, on the emulator (this machine: "
          f"{os.cpu_count()} CPUs)")  # fmt: skip
    print(f"{'probes':<11}{'req/s':>8}{'tok/s':>9}{'TTFT p50':>10}{'TTFT p99':>10}"
          f"{'e2e p99':>9}{'errors':>8}{'run s':>7}")  # fmt: skip
    for probes, s in rows.items():
        ttft, e2e, tput = s["ttft_ms"], s["e2e_ms"], s["throughput"]
        print(
            f"{probes:<11}{tput['requests_per_s']:>8.1f}{tput['output_tokens_per_s']:>9.0f}"
            f"{ttft['p50']:>10.1f}{ttft['p99']:>10.1f}{e2e['p99']:>9.1f}"
            f"{s['requests']['errors']:>8}{s['wall_s']:>7.1f}"
        )


if __name__ == "__main__":
    main()
