"""How fast the Kubernetes API emulator creates, lists and streams watch events.

Starts ``testbed cluster emulate --nodes NODES`` as a child process, opens WATCHERS watch
streams on all pods (what informers and the scale sampler do), creates PODS pods at a
concurrency of CONCURRENCY, then patches each pod's status once (a MODIFIED event per pod,
as a kubelet does). The pods name a scheduler that does not exist, so the emulator's
scheduler and kubelet leave them alone and the figures are the API server's. With
``--scheduled`` they go to the emulator's scheduler and kubelet instead (no status patches)
and the figure is the time until every watcher has seen every pod Running.
Prints create/s and status-update/s, the time until every watcher has received every event,
watch events delivered per second (all watchers together and per watcher), and list latency
of all nodes and all pods. The clients share the machine's cores with the emulator, so the
figures are lower bounds.

    .venv/bin/python bench/emulator_api.py [--nodes 1000] [--pods 2000] [--watchers 8]
        [--concurrency 32] [--scheduled]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import re
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import orjson
import yaml

ROOT = Path(__file__).resolve().parents[1]


def start(nodes: int, work: Path) -> tuple[subprocess.Popen[bytes], Path]:
    kubeconfig = work / "kubeconfig"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    command = [sys.executable, "-m", "testbed", "cluster", "emulate", "--port", "0"]
    command += ["--kubeconfig", str(kubeconfig), "--nodes", str(nodes)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, env=env, start_new_session=True)
    assert process.stdout is not None
    line = process.stdout.readline().decode()
    if not re.search(r"kubeconfig written to", line):
        process.kill()
        raise SystemExit(f"emulator did not start: {line!r}")
    return process, kubeconfig


def connection(kubeconfig: Path) -> tuple[str, dict[str, str], ssl.SSLContext]:
    config = yaml.safe_load(kubeconfig.read_text())
    cluster = config["clusters"][0]["cluster"]
    context = ssl.create_default_context(
        cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
    )
    headers = {"Authorization": f"Bearer {config['users'][0]['user']['token']}"}
    return cluster["server"], headers, context


async def watcher(
    session: aiohttp.ClientSession,
    url: str,
    pods: int,
    done: asyncio.Event,
    counts: list[int],
    i: int,
) -> None:
    """Count events until every pod was seen with phase Running."""
    running: set[bytes] = set()
    async with session.get(
        f"{url}/api/v1/pods", params={"watch": "1", "resourceVersion": "1"}
    ) as resp:
        buffer = b""
        async for chunk in resp.content.iter_any():
            buffer += chunk
            lines = buffer.split(b"\n")
            buffer = lines.pop()
            counts[i] += len(lines)
            for line in lines:
                if b'"phase":"Running"' in line:
                    event = orjson.loads(line)
                    running.add(event["object"]["metadata"]["name"].encode())
            if len(running) >= pods:
                break
    done.set()


def pod(i: int, scheduled: bool) -> bytes:
    return orjson.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"bench-{i}", "labels": {"app": "bench", "i": str(i % 10)}},
            "spec": {
                "schedulerName": "default-scheduler" if scheduled else "bench-unscheduled",
                "containers": [
                    {
                        "name": "c",
                        "image": "busybox:1.36",
                        "resources": {"requests": {"cpu": "100m"}},
                    }
                ],
            },
        }
    )


async def run(args: argparse.Namespace, kubeconfig: Path) -> None:
    url, headers, context = connection(kubeconfig)
    connector = aiohttp.TCPConnector(ssl=context, limit=args.concurrency + args.watchers + 4)
    timeout = aiohttp.ClientTimeout(total=None)
    async with aiohttp.ClientSession(
        headers=headers, connector=connector, timeout=timeout
    ) as session:
        counts = [0] * args.watchers
        dones = [asyncio.Event() for _ in range(args.watchers)]
        tasks = [
            asyncio.create_task(watcher(session, url, args.pods, dones[i], counts, i))
            for i in range(args.watchers)
        ]
        await asyncio.sleep(0.5)
        queue: asyncio.Queue[int] = asyncio.Queue()
        for i in range(args.pods):
            queue.put_nowait(i)

        async def worker(action: str) -> None:
            while not queue.empty():
                i = queue.get_nowait()
                if action == "create":
                    async with session.post(
                        f"{url}/api/v1/namespaces/default/pods",
                        data=pod(i, args.scheduled),
                        headers={"Content-Type": "application/json"},
                    ) as resp:
                        assert resp.status == 201, await resp.text()
                        await resp.read()
                else:
                    body = {"status": {"phase": "Running", "podIP": f"10.1.{i // 250}.{i % 250}"}}
                    async with session.patch(
                        f"{url}/api/v1/namespaces/default/pods/bench-{i}/status",
                        data=orjson.dumps(body),
                        headers={"Content-Type": "application/merge-patch+json"},
                    ) as resp:
                        assert resp.status == 200, await resp.text()
                        await resp.read()

        began = time.perf_counter()
        await asyncio.gather(*(worker("create") for _ in range(args.concurrency)))
        created = time.perf_counter()
        if not args.scheduled:
            for i in range(args.pods):
                queue.put_nowait(i)
            await asyncio.gather(*(worker("status") for _ in range(args.concurrency)))
        updated = time.perf_counter()
        async with asyncio.timeout(300):
            await asyncio.gather(*(d.wait() for d in dones))
        delivered = time.perf_counter()
        for task in tasks:
            task.cancel()
        print(
            f"create:         {args.pods / (created - began):8.0f} pods/s"
            f" ({args.pods} pods, concurrency {args.concurrency})"
        )
        if args.scheduled:
            print(
                f"all Running:    {delivered - began:8.2f} s after the first create"
                " (seen by every watcher)"
            )
        else:
            print(f"status update:  {args.pods / (updated - created):8.0f} patches/s")
        total_events = sum(counts)
        span = delivered - began
        print(
            f"watch:          {total_events / span:8.0f} events/s delivered to"
            f" {args.watchers} watchers ({total_events / span / args.watchers:.0f} per watcher;"
            f" last event {delivered - updated:.2f} s after the last write)"
        )
        for path, label in (("/api/v1/nodes", "nodes"), ("/api/v1/pods", "pods")):
            samples = []
            for _ in range(5):
                t0 = time.perf_counter()
                async with session.get(url + path) as resp:
                    body = await resp.read()
                samples.append(time.perf_counter() - t0)
            items = len(orjson.loads(body)["items"])
            print(
                f"list {label:5s}:     {statistics.median(samples) * 1000:8.1f} ms median"
                f" ({items} objects, {len(body) / 1e6:.1f} MB)"
            )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--watchers", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument(
        "--scheduled", action="store_true", help="let the scheduler and kubelet run the pods"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-emulator-") as tmp:
        process, kubeconfig = start(args.nodes, Path(tmp))
        try:
            asyncio.run(run(args, kubeconfig))
        finally:
            process.send_signal(signal.SIGTERM)
            code = process.wait(timeout=30)
            print(f"emulator exit code {code}; load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
