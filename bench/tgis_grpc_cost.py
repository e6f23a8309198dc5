"""What one streamed request costs the load generator: over TGIS's gRPC against over HTTP.

The simulator (a child process, instant answers: the server is never the bottleneck) serves
the same prompts on both doors; the load probe drives each with ``--concurrency`` requests in
flight for ``--duration`` seconds and reports the harness's CPU per request (``cpu_ms_per_
request``, the load process's CPU time / completed requests) and the throughput.

    .venv/bin/python bench/tgis_grpc_cost.py [--concurrency 8] [--duration 5] [--tokens 64]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import tempfile
from pathlib import Path
from typing import Any

from testbed.clients.endpoint import Endpoint
from testbed.config.load import LoadProbe
from testbed.probes.base import ProbeContext
from testbed.probes.load import run
from testbed.results.files import RecordWriter
from testbed.servers.sim.child import sim_process


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
    port = _free_port()
    with sim_process("--protocols", "openai,tgi,tgis", "--grpc-port", str(port)) as url:
        endpoint = Endpoint(
            url, protocols=("openai", "tgi", "tgis"), grpc_target=f"127.0.0.1:{port}"
        )
        print(f"load average {os.getloadavg()[0]:.2f}; {args.tokens} tokens a request")
        print(f"{'api':12} {'req/s':>8} {'CPU ms/req':>11} {'ITL p50 ms':>11}")
        for api in ("completions", "tgi", "tgis"):
            s = _run(endpoint, api, args)
            print(
                f"{api:12} {s['throughput']['requests_per_s']:8.1f}"
                f" {s['harness']['cpu_ms_per_request']:11.3f} {s['itl_ms']['p50']:11.3f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
