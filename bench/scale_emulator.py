"""Scale test against the emulator: 1,000 workloads onto 1,000 fake GPU nodes, submitted,
sampled and plotted; prints the submit rate, the events per second the sampler took in,
its CPU per event, how far behind the API it ran, and how long the plotter took.

    PYTHONPATH=src python bench/scale_emulator.py [--workloads 1000] [--nodes 1000] [-p 10]

The emulator, the submitter and the sampler are three processes on this machine; the
sampler's CPU comes from its own rusage (os.wait4), so it is the sampler's alone. "Lag" is
the sampler's watch receive time minus the emulator's eventTime for every event it saw live:
a sampler that keeps up has a small, flat lag; one that falls behind sees it grow.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import numpy.typing as npt

TESTBED = [sys.executable, "-m", "testbed"]


def start_emulator(work: Path, nodes: int, gpus: int) -> tuple[subprocess.Popen[bytes], Path]:
    kubeconfig = work / "kubeconfig"
    command = [*TESTBED, "cluster", "emulate", "--port", "0", "--kubeconfig", str(kubeconfig)]
    command += ["--nodes", str(nodes), "--gpus-per-node", str(gpus)]
    log = (work / "emulator.log").open("wb")
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, start_new_session=True)
    assert process.stdout is not None
    deadline = time.monotonic() + 120
    seen = b""
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        seen += line
        if re.search(rb"kubeconfig written to", seen):
            return process, kubeconfig
    process.kill()
    raise SystemExit(f"emulator did not start: {seen!r}")


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def running_count(out: Path) -> int:
    """Workloads whose pods are Running, from sampled.json (a bench may poll a file)."""
    try:
        data = json.loads((out / "sampled.json").read_text())
    except (OSError, ValueError):
        return 0
    return sum(1 for p in data["pods"].values() if p.get("phase") in ("Running", "Succeeded"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workloads", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("-p", "--parallel", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="scale-bench-"))
    out = work / "out"
    started = time.perf_counter()
    emulator, kubeconfig = start_emulator(work, args.nodes, args.gpus)
    took = time.perf_counter() - started
    print(f"emulator with {args.nodes} nodes × {args.gpus} GPUs up in {took:.1f} s")
    connection = ["--kubeconfig", str(kubeconfig)]
    sampler = None
    try:
        submit_cmd = [*TESTBED, "scale", "submit", "-o", str(out), "-n", str(args.workloads)]
        submit_cmd += ["-p", str(args.parallel), "-g", str(args.gpus), *connection]
        # the header must exist before the sampler starts: submit 0 first is not possible,
        # so the sampler starts right after the submitter wrote its header line
        submitter = subprocess.Popen(submit_cmd, stdout=subprocess.PIPE, text=True)
        while not (out / "submitted.json").exists():
            time.sleep(0.05)
        sampler = subprocess.Popen(
            [*TESTBED, "scale", "sample", "-o", str(out), "--follow", *connection],
            stdout=subprocess.PIPE,
            text=True,
        )
        submit_out, _ = submitter.communicate(timeout=args.timeout)
        print("submit:", submit_out.strip().splitlines()[-1])
        deadline = time.monotonic() + args.timeout
        while running_count(out) < args.workloads and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(1.5)  # one more save of the sampler
        sampler.send_signal(signal.SIGINT)
        _, status, usage = os.wait4(sampler.pid, 0)
        sampler_out = sampler.stdout.read() if sampler.stdout else ""
        sampler.returncode = os.waitstatus_to_exitcode(status)
        report(out, usage, sampler_out)
        plot_started = time.perf_counter()
        plotted = subprocess.run(
            [
                *TESTBED,
                "scale",
                "plot",
                "-o",
                str(out),
                "--threshold",
                "p99 scheduled→running < 5 s",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        print(f"plot: {time.perf_counter() - plot_started:.2f} s, exit {plotted.returncode}")
        print(plotted.stdout)
    finally:
        if sampler is not None and sampler.poll() is None:
            sampler.kill()
        stop(emulator)
    print(f"files in {out}")


def report(out: Path, usage: resource.struct_rusage | object, sampler_out: str) -> None:
    data = json.loads((out / "sampled.json").read_text())
    subs = [json.loads(x) for x in (out / "submitted.json").read_text().splitlines()[1:] if x]
    sent = sorted(s["sent_ms"] for s in subs)
    span_s = (sent[-1] - sent[0]) / 1000 if len(sent) > 1 else 0.0
    rate = len(subs) / span_s if span_s else 0.0
    print(f"submitted {len(subs)} in {span_s:.2f} s: {rate:.0f} workloads/s")
    lags, times_ms = [], []
    for event in data["events"].values():
        t = event["t"]
        if "event" in t and "watch" in t:
            lags.append(t["watch"] - t["event"])
            times_ms.append(t["event"])
    cpu = getattr(usage, "ru_utime", 0.0) + getattr(usage, "ru_stime", 0.0)
    line = sampler_out.strip().splitlines()[-1] if sampler_out.strip() else ""
    print("sampler said:", line or "(nothing)")
    found = re.search(r"(\d+) watch event\(s\), (\d+) listed, ([\d.]+) ms CPU each", line)
    if not times_ms or found is None:
        return
    live, listed, cpu_each = int(found[1]), int(found[2]), float(found[3])
    window = (max(times_ms) - min(times_ms)) / 1000
    peak = _peak_rate(np.sort(np.asarray(times_ms)))
    print(
        f"watch events the sampler took in: {live} (pods, Events, Jobs) over the {window:.1f} s"
        f" the cluster was busy = {live / window:.0f}/s; Kubernetes Events alone:"
        f" {len(times_ms)} ({peak:.0f} in the busiest second)"
    )
    print(
        f"sampler CPU while sampling: {cpu_each:.3f} ms per object ({live + listed} objects)"
        f" → {1000 / cpu_each:.0f} objects/s on one core; whole process incl. start-up and"
        f" imports {cpu:.2f} s"
    )
    lag = np.asarray(lags)
    print(
        f"lag (watch receive − eventTime): p50 {np.percentile(lag, 50):.1f} ms,"
        f" p99 {np.percentile(lag, 99):.1f} ms, max {lag.max():.1f} ms"
    )


def _peak_rate(sorted_ms: npt.NDArray[np.float64]) -> float:
    if sorted_ms.size == 0:
        return 0.0
    ends = np.searchsorted(sorted_ms, sorted_ms + 1000.0, side="left")
    return float((ends - np.arange(sorted_ms.size)).max())


if __name__ == "__main__":
    main()
