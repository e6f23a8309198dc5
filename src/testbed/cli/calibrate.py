"""``testbed calibrate``: the load harness's own ceiling against the simulator.

Starts the simulator as a child process at zero latency (or uses ``--url``), measures the
generator's CPU milliseconds per streamed request and the highest open-loop rate it
sustains with its self-check passing, and prints both.
"""

from __future__ import annotations

import argparse
import contextlib
from typing import Any


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "calibrate",
        help="the load harness's ceiling (CPU per request, highest rate) against the simulator",
        description="Measure the load generator against a zero-latency simulator.",
    )
    p.add_argument("--url", help="use this server instead of starting the simulator")
    p.add_argument("--concurrency", type=int, default=32, help="closed-loop stage (default 32)")
    p.add_argument("--stage-seconds", type=float, default=4.0, help="seconds per stage")
    p.add_argument("--processes", type=int, default=1, help="load processes")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    import json
    import sys

    from testbed.probes.load.calibrate import calibrate
    from testbed.probes.load.loops import run_fast
    from testbed.servers.sim.child import sim_process

    with contextlib.ExitStack() as stack:
        url = args.url or stack.enter_context(sim_process())
        result = run_fast(
            calibrate(
                url,
                concurrency=args.concurrency,
                stage_s=args.stage_seconds,
                processes=args.processes,
                progress=lambda msg: print(msg, file=sys.stderr),
            )
        )
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    rate = result["max_sustained_rate"]
    print(f"CPU per streamed request: {result['cpu_ms_per_request']:.3f} ms")
    print(
        f"closed loop, concurrency {result['closed_loop']['concurrency']}:"
        f" {result['closed_loop']['requests_per_s']:.0f} requests/s"
    )
    print(f"highest sustained rate: {rate:.0f} requests/s" if rate else "no rate sustained")
    print(f"stopped because: {result['stopped_because']}")
    return 0
