"""What one streamed request costs the load generator: over TGIS's gRPC against over HTTP.

The simulator (a child process, instant answers) serves the same prompts on its three
doors; the load probe drives each with ``--concurrency`` requests in flight for
``--duration`` seconds and reports the harness's CPU per request (``cpu_ms_per_request``,
the load process's CPU time / completed requests), the throughput, and the simulator's own
CPU per request (from /proc: what its door costs the server).

    .venv/bin/python bench/tgis_grpc_cost.py [--concurrency 8] [--duration 5] [--tokens 64]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from pathlib import Path
from typing import Any

from load_cost import Sim
from testbed.clients.endpoint import Endpoint
from testbed.config.load import LoadProbe
from testbed.probes.base import ProbeContext
from testbed.probes.load import run
from testbed.results.files import RecordWriter


def _run(endpoint: Endpoint, api: str, args: argparse.Namespace) -> dict[str, Any]:
    config = LoadProbe.model_validate(
        {
            "api": api,
            "concurrency": args.concurrency,
            "duration_s": args.duration,
            "dataset": {"input_tokens": 32, "output_tokens": args.tokens},
            "plots": False,
            "server_metrics": {"enabled": False},
        }
    )
    with tempfile.TemporaryDirectory() as out, RecordWriter(Path(out) / "r.jsonl") as records:
        outcome = asyncio.run(run(ProbeContext({"sim": endpoint}, config, Path(out), records)))
    return outcome.summary


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()
    sim = Sim(0.0, 0.0)
    try:
        print(f"load average {os.getloadavg()[0]:.2f}; {args.tokens} tokens a request")
        print(f"{'api':12} {'req/s':>8} {'CPU ms/req':>11} {'ITL p50 ms':>11} {'sim ms/req':>11}")
        for api in ("completions", "tgi", "tgis"):
            cpu0 = sim.cpu_s()
            s = _run(sim.endpoint(), api, args)
            done = s["requests"]["ok"]
            print(
                f"{api:12} {s['throughput']['requests_per_s']:8.1f}"
                f" {s['harness']['cpu_ms_per_request']:11.3f} {s['itl_ms']['p50']:11.3f}"
                f" {(sim.cpu_s() - cpu0) * 1e3 / done:11.3f}"
            )
    finally:
        sim.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
