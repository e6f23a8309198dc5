"""How exactly the load probe measures TTFT and ITL, against the simulator's ground truth.

The simulator (a child process, ``testbed serve sim``) is told its TTFT and ITL (no
jitter); the load probe drives it open loop at ``--rate`` requests/s and reports TTFT and ITL
p50 and p99. The target: each within 0.5 ms of the configured value at 200 requests/s.
Both processes share this machine's cores, so what the load of *other* programs does to
scheduling shows up here too: the script prints the load average next to the figures.

    .venv/bin/python bench/load_accuracy.py [--rate 200] [--duration 10] [--ttft-ms 20]
        [--itl-ms 5] [--processes 1] [--arrival poisson]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOLERANCE_MS = 0.5


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--ttft-ms", type=float, default=20.0)
    parser.add_argument("--itl-ms", type=float, default=5.0)
    parser.add_argument("--output-tokens", type=int, default=64)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--arrival", default="poisson")
    args = parser.parse_args()

    sim_cmd = [sys.executable, "-m", "testbed", "serve", "sim", "--port", "0"]
    sim_cmd += ["--ttft-ms", str(args.ttft_ms), "--itl-ms", str(args.itl_ms)]
    sim = subprocess.Popen(sim_cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert sim.stdout is not None
        line = sim.stdout.readline()
        if "listening on" not in line:
            raise SystemExit(f"simulator did not start: {line}")
        url = line.rsplit(" ", 1)[-1].strip()
        with tempfile.TemporaryDirectory(prefix="load-accuracy-") as out:
            cmd = [str(ROOT / ".venv/bin/testbed"), "load", url, "--profile", "rate"]
            cmd += ["--rate", str(args.rate), "--arrival", args.arrival]
            cmd += ["--duration", str(args.duration), "--warmup", str(args.warmup)]
            cmd += ["--output-tokens", str(args.output_tokens), "--processes", str(args.processes)]
            cmd += ["--out", out, "--json", "--no-plots"]
            load_before = os.getloadavg()
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if done.returncode not in (0, 1):
                raise SystemExit(f"testbed load failed: {done.stderr[-800:]}")
            summary = json.loads((Path(out) / "summary.json").read_text())
            load_after = os.getloadavg()
    finally:
        sim.terminate()
        sim.wait(timeout=10)

    print(
        f"rate {args.rate:g}/s ({args.arrival}), {args.duration:g} s, {args.processes} load"
        f" process(es); simulator TTFT {args.ttft_ms} ms, ITL {args.itl_ms} ms, no jitter"
    )
    print(f"load average before/after: {load_before[0]:.2f} / {load_after[0]:.2f} (2 cores)")
    print(f"{'metric':10}{'configured':>12}{'measured':>11}{'error':>9}{'within 0.5 ms':>15}")
    verdicts = []
    for metric, truth in (("ttft_ms", args.ttft_ms), ("itl_ms", args.itl_ms)):
        for q in ("p50", "p99"):
            value = summary[metric][q]
            error = value - truth
            ok = abs(error) <= TOLERANCE_MS
            verdicts.append(ok)
            mark = "yes" if ok else "NO"
            print(f"{metric + ' ' + q:10}{truth:>12.3f}{value:>11.3f}{error:>+9.3f}{mark:>15}")
    h = summary["harness"]
    print(
        f"achieved {h['achieved_rate']:.1f}/s of {h['requested_rate']:.1f}/s; schedule lag p50"
        f" {h['schedule_lag_ms']['p50']:.3f} ms, p99 {h['schedule_lag_ms']['p99']:.3f} ms;"
        f" generator CPU {h['cpu_ms_per_request']:.3f} ms/request,"
        f" {h['cpu_fraction']:.0%} of a core"
    )
    print(f"verdict of the run: {summary['verdict']['status']} — {summary['verdict']['reason']}")
    return 0 if all(verdicts) else 1


if __name__ == "__main__":
    raise SystemExit(main())
