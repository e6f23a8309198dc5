"""testbed's load generator side by side with guidellm, aiperf and inference-perf, in one run.

Every tool drives the same simulator (``testbed serve sim``, zero latency unless
``--ttft-ms``/``--itl-ms``) with the same workload: 128 prompt / 64 output tokens, streamed
completions, concurrency 32, ``--requests`` requests. Per tool:

- **CPU ms per request**: CPU time of the tool's whole process tree (the larger of
  ``RUSAGE_CHILDREN`` around the run and per-process ``/proc/<pid>/stat`` samples) divided
  by the requests the *simulator* counted as completed;
- **start-up**: launch until the simulator sees the tool's first request;
- **peak RSS**: the largest sum of ``VmRSS`` over the tree, sampled every 50 ms;
- **highest sustained rate** (``--ladder``): open-loop runs at rising rates; sustained while
  the simulator counts ≥ 95 % of the requested rate over the run.

Peers come from ``.venv-peers/<tool>/`` (``scripts/peers.sh``); missing ones are skipped. The
tokenizer folder (``testbed models prepare smollm2-135m``) is given to every tool.

    .venv/bin/python bench/load_vs_peers.py [--requests 2000] [--tools testbed,aiperf]
        [--ladder 100,200,400,800] [--ttft-ms 0 --itl-ms 0] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PEERS = ROOT / ".venv-peers"
TOKENIZER = Path(os.environ.get("TESTBED_CACHE", Path.home() / ".cache/testbed")) / (
    "models/smollm2-135m"
)
TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
MODEL = "sim-model"


# -- the simulator ---------------------------------------------------------------------------


def start_sim(ttft_ms: float, itl_ms: float) -> tuple[subprocess.Popen[str], str]:
    cmd = [sys.executable, "-m", "testbed", "serve", "sim", "--port", "0"]
    cmd += ["--ttft-ms", str(ttft_ms), "--itl-ms", str(itl_ms)]
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert child.stdout is not None
    line = child.stdout.readline()
    if "listening on" not in line:
        raise SystemExit(f"simulator did not start: {line}")
    return child, line.rsplit(" ", 1)[-1].strip()


def sim_counts(url: str) -> tuple[float, float]:
    """(completed requests, running requests) from the simulator's /metrics."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as response:
        text = response.read().decode()
    done = running = 0.0
    for line in text.splitlines():
        if line.startswith("vllm:request_success_total"):
            done += float(line.rsplit(" ", 1)[1])
        elif line.startswith("vllm:num_requests_running"):
            running += float(line.rsplit(" ", 1)[1])
    return done, running


# -- process tree sampling ---------------------------------------------------------------------


def children_of() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            tree.setdefault(ppid, []).append(int(entry))
    return tree


def tree_of(root: int) -> list[int]:
    tree, out, todo = children_of(), [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += tree.get(pid, [])
    return out


def cpu_and_rss(pid: int) -> tuple[float, int]:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0, 0
    return (int(fields[11]) + int(fields[12])) / TICK, int(fields[21]) * PAGE


@dataclass
class Watch:
    """Samples a tool's process tree and the simulator while the tool runs."""

    root: int
    url: str
    t_launch: float
    cpu: dict[int, float] = field(default_factory=dict)
    peak_rss: int = 0
    t_first: float | None = None
    samples: list[tuple[float, float]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.stop.is_set():
            rss = 0
            for pid in tree_of(self.root):
                cpu, mem = cpu_and_rss(pid)
                self.cpu[pid] = max(self.cpu.get(pid, 0.0), cpu)
                rss += mem
            self.peak_rss = max(self.peak_rss, rss)
            try:
                done, running = sim_counts(self.url)
            except OSError:
                done, running = (self.samples[-1][1] if self.samples else 0.0), 0.0
            now = time.monotonic()
            self.samples.append((now, done))
            if self.t_first is None and (
                running > 0 or (len(self.samples) > 1 and done > self.samples[0][1])
            ):
                self.t_first = now
            self.stop.wait(0.05)


def measure(
    cmd: list[str], url: str, env: dict[str, str] | None = None, cwd: str | None = None
) -> dict[str, Any]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done0, _ = sim_counts(url)
    t0 = time.monotonic()
    child = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=cwd
    )
    watch = Watch(child.pid, url, t0)
    thread = threading.Thread(target=watch.run, daemon=True)
    thread.start()
    output, _ = child.communicate(timeout=1800)
    wall = time.monotonic() - t0
    watch.stop.set()
    thread.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    done1, _ = sim_counts(url)
    rusage_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    cpu = max(rusage_cpu, sum(watch.cpu.values()))
    completed = done1 - done0
    # the active period: first request seen until the simulator's count stopped moving
    last = next((t for t, d in watch.samples if d >= done1), watch.samples[-1][0])
    active = (last - watch.t_first) if watch.t_first else wall
    return {
        "exit": child.returncode,
        "completed": completed,
        "cpu_s": cpu,
        "cpu_ms_per_request": cpu * 1e3 / completed if completed else None,
        "startup_s": (watch.t_first - t0) if watch.t_first else None,
        "peak_rss_mb": watch.peak_rss / 2**20,
        "wall_s": wall,
        "requests_per_s": completed / active if active > 0 else None,
        "tail": output.decode(errors="replace")[-600:] if child.returncode else "",
        "samples": watch.samples,
        "t_first": watch.t_first,
    }


# -- the tools -----------------------------------------------------------------------------------


def cmd_testbed(
    url: str, work: Path, *, requests: int | None, rate: float | None, duration: float
) -> list[str]:
    cmd = [str(ROOT / ".venv/bin/testbed"), "load", url, "--out", str(work / "testbed"), "--json"]
    # no PNGs: the peers draw none by default either
    cmd += ["--input-tokens", "128", "--output-tokens", "64", "--seed", "1", "--no-plots"]
    if TOKENIZER.is_dir():
        cmd += ["--tokenizer", str(TOKENIZER)]
    if rate is None:
        cmd += ["--concurrency", "32", "--requests", str(requests), "--duration", "3600"]
    else:
        cmd += ["--profile", "rate", "--rate", str(rate), "--arrival", "constant"]
        cmd += ["--duration", str(duration)]
    return cmd


def cmd_guidellm(
    url: str, work: Path, *, requests: int | None, rate: float | None, duration: float
) -> list[str]:
    profile: dict[str, Any] = (
        {"kind": "concurrent", "streams": [32]}
        if rate is None
        else {"kind": "constant", "rate": [rate]}
    )
    constraint = (
        {"kind": "max_requests", "count": requests}
        if rate is None
        else {"kind": "max_duration", "seconds": duration}
    )
    spec = {
        "metadata": {"name": "bench"},
        "spec": {
            "backend": {
                "kind": "openai_http",
                "target": url,
                "request_format": "/v1/completions",
                "model": MODEL,
            },
            "profile": profile,
            "data": [{"kind": "synthetic_text", "prompt_tokens": 128, "output_tokens": 64}],
            "constraints": [constraint],
            "tokenizer": {"kind": "huggingface_auto", "model": str(TOKENIZER)},
        },
    }
    path = work / "guidellm.json"
    path.write_text(json.dumps(spec))
    return [
        str(PEERS / "guidellm/bin/guidellm"),
        "run",
        "--config",
        str(path),
        "--disable-console-interactive",
        "--output",
        "kind=json",
    ]


def cmd_aiperf(
    url: str, work: Path, *, requests: int | None, rate: float | None, duration: float
) -> list[str]:
    cmd = [str(PEERS / "aiperf/bin/aiperf"), "profile", "--model", MODEL, "--url", url]
    cmd += ["--endpoint-type", "completions", "--streaming", "--tokenizer", str(TOKENIZER)]
    cmd += ["--prompt-input-tokens-mean", "128", "--prompt-input-tokens-stddev", "0"]
    cmd += [
        "--output-tokens-mean",
        "64",
        "--output-tokens-stddev",
        "0",
        "--extra-inputs",
        "ignore_eos:true",
    ]
    cmd += ["--ui-type", "none", "--artifact-dir", str(work / "aiperf")]
    if rate is None:
        cmd += ["--concurrency", "32", "--request-count", str(requests)]
    else:
        cmd += [
            "--request-rate",
            str(rate),
            "--request-rate-mode",
            "constant",
            "--benchmark-duration",
            str(duration),
        ]
    return cmd


def cmd_inference_perf(
    url: str, work: Path, *, requests: int | None, rate: float | None, duration: float
) -> list[str]:
    if rate is None:
        load = f"type: concurrent\n  stages: [{{num_requests: {requests}, concurrency_level: 32}}]"
    else:
        load = f"type: constant\n  stages: [{{rate: {rate}, duration: {int(duration)}}}]"
    count = max(requests or 0, int((rate or 0) * duration) + 10, 1000)
    config = f"""api: {{type: completion, streaming: true}}
data:
  type: random
  input_distribution: {{min: 128, max: 128, mean: 128, std_dev: 0, total_count: {count}}}
  output_distribution: {{min: 64, max: 64, mean: 64, std_dev: 0, total_count: {count}}}
load:
  {load}
  num_workers: 1
server: {{type: vllm, model_name: {MODEL}, base_url: "{url}", ignore_eos: true}}
tokenizer: {{pretrained_model_name_or_path: "{TOKENIZER}"}}
storage: {{local_storage: {{path: "{work / "inference-perf"}"}}}}
"""
    path = work / "inference-perf.yaml"
    path.write_text(config)
    return [str(PEERS / "inference-perf/bin/inference-perf"), "--config_file", str(path)]


TOOLS = {
    "testbed": (cmd_testbed, ROOT / ".venv/bin/testbed"),
    "guidellm": (cmd_guidellm, PEERS / "guidellm/bin/guidellm"),
    "aiperf": (cmd_aiperf, PEERS / "aiperf/bin/aiperf"),
    "inference-perf": (cmd_inference_perf, PEERS / "inference-perf/bin/inference-perf"),
}


def env_for(tool: str) -> dict[str, str]:
    """Offline for every tool but aiperf, which then refuses a local tokenizer folder."""
    env = dict(os.environ)
    if tool == "aiperf":
        env.pop("HF_HUB_OFFLINE", None)
    else:
        env.setdefault("HF_HUB_OFFLINE", "1")
        env.setdefault("TRANSFORMERS_OFFLINE", "1")
    return env


def sustained(
    url: str, tool: str, rates: list[float], duration: float, work: Path
) -> tuple[float | None, list[dict[str, Any]]]:
    build, _ = TOOLS[tool]
    best, trail = None, []
    for rate in rates:
        cmd = build(url, work, requests=None, rate=rate, duration=duration)
        result = measure(cmd, url, env_for(tool), cwd=str(work))
        # completions over the sending window, counted by the simulator
        achieved = None
        if result["t_first"] is not None:
            start = result["t_first"]
            inside = [d for t, d in result["samples"] if start <= t <= start + duration]
            if len(inside) > 1:
                achieved = (inside[-1] - inside[0]) / duration
        # testbed exits 1 for a FAIL or INCONCLUSIVE verdict: the load still ran
        ran = result["exit"] == 0 or (tool == "testbed" and result["exit"] == 1)
        ok = ran and achieved is not None and achieved >= 0.95 * rate
        trail.append({"rate": rate, "achieved": achieved, "exit": result["exit"], "ok": ok})
        print(
            f"  {tool} @ {rate:g}/s: achieved {achieved and round(achieved, 1)}/s"
            f" {'ok' if ok else 'NOT sustained'}",
            flush=True,
        )
        if not ok:
            break
        best = rate
    return best, trail


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--tools", default="testbed,guidellm,aiperf,inference-perf")
    parser.add_argument(
        "--ladder", default="", help="comma-separated rates for the sustained-rate test"
    )
    parser.add_argument("--ladder-seconds", type=float, default=10.0)
    parser.add_argument("--ttft-ms", type=float, default=0.0)
    parser.add_argument("--itl-ms", type=float, default=0.0)
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args()
    tools = [t for t in args.tools.split(",") if t]
    sim, url = start_sim(args.ttft_ms, args.itl_ms)
    results: dict[str, dict[str, Any]] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="load-vs-peers-") as tmp:
            for tool in tools:
                build, binary = TOOLS[tool]
                if not binary.exists():
                    print(f"{tool}: not installed ({binary}); run scripts/peers.sh", flush=True)
                    continue
                work = Path(tmp) / tool
                work.mkdir()
                print(f"{tool}: concurrency 32, {args.requests} requests …", flush=True)
                result = measure(
                    build(url, work, requests=args.requests, rate=None, duration=0),
                    url,
                    env_for(tool),
                    cwd=str(work),
                )
                result.pop("samples")
                if result["exit"]:
                    print(f"  {tool} failed (exit {result['exit']}): {result['tail']}", flush=True)
                results[tool] = result
                if args.ladder:
                    rates = [float(r) for r in args.ladder.split(",")]
                    best, trail = sustained(url, tool, rates, args.ladder_seconds, work)
                    result["max_sustained_rate"], result["ladder"] = best, trail
    finally:
        sim.terminate()
        sim.wait(timeout=10)
    print_table(results, args)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str))
    return 0


def print_table(results: dict[str, dict[str, Any]], args: argparse.Namespace) -> None:
    base = results.get("testbed", {}).get("cpu_ms_per_request")
    print(
        f"\nconcurrency 32, 128 in / 64 out, streamed, {args.requests} requests;"
        f" simulator TTFT {args.ttft_ms} ms, ITL {args.itl_ms} ms"
    )
    head = f"{'tool':16}{'CPU ms/req':>11}{'× testbed':>10}{'req/s':>8}{'start-up s':>11}"
    head += f"{'peak RSS MB':>12}{'max rate':>10}"
    print(head)
    print("-" * len(head))
    for tool, r in results.items():
        cpu = r.get("cpu_ms_per_request")
        ratio = f"{cpu / base:.1f}" if cpu and base else "–"
        rate = r.get("max_sustained_rate")
        print(
            f"{tool:16}{(cpu or 0):>11.3f}{ratio:>10}{(r.get('requests_per_s') or 0):>8.0f}"
            f"{(r.get('startup_s') or 0):>11.2f}{r['peak_rss_mb']:>12.0f}"
            f"{(f'{rate:g}' if rate else '–'):>10}"
        )


if __name__ == "__main__":
    raise SystemExit(main())
