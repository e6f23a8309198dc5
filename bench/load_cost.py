"""The load generator's own cost, compared with the last recorded figures: REGRESSION fails.

Figures (all lower-is-better, CPU time: steadier than wall-clock rates on a shared machine):

- ``parse_us_per_chunk``: the per-chunk path alone (HTTP/1.1 framing, SSE, JSON, the OpenAI
  decoder) over the bytes of one real 64-token stream of the simulator, fed read by read
  to the connection the pool opens (:data:`~testbed.clients.http1.CONNECTION`: the compiled
  per-read path when it was built; no sockets, no event loop waits);
- ``parse_python_us_per_chunk``: the same by the Python classes alone (what a testbed
  installed without a C compiler runs; the compiled path's reference);
- ``floor_cpu_ms_per_request``: a bare protocol reading the same streams as the next figure
  and parsing nothing — what the machine charges for the reads and the event loop's
  wake-ups alone; a figure of the machine (never a REGRESSION), the floor under the next;
- ``stream_cpu_ms_per_request``: the load probe's own CPU per request (``harness.
  cpu_ms_per_request``: process time over the stage / completed requests, every token's
  timestamp kept) streaming 64 tokens at concurrency 32 from the simulator with TTFT
  20 ms, ITL 5 ms — a chunk per token, as a real server sends them;
- ``sessions_cpu_ms_per_request``: the streamed figure's load as multi-turn sessions (4
  turns of 128 new tokens and 64 out, 32 sessions in flight, the history sent with every
  turn): each turn encoded when it is sent, its prompt grown by the answers before it;
- ``instant_cpu_ms_per_request``: the same at zero server latency (chunks coalesce);
- ``sim_cpu_ms_per_request``: the simulator's CPU per request in that run;
- ``tgis_stream_cpu_ms_per_request``: the streamed figure's request over TGIS gRPC (TTFT 20 ms,
  ITL 5 ms, concurrency 32: a message per token) — gRPC's price next to HTTP's;
- ``tgis_cpu_ms_per_request``: 64 streamed tokens over TGIS gRPC, concurrency 8, instant;
- ``tgis_parse_us_per_message``: the gRPC client's per-message path alone (HTTP/2 framing,
  the protobuf decoder, the sink) over the reads of one connection that carried two real
  64-token streams of the simulator, replayed into a
  :class:`~testbed.clients.grpc_h2.GrpcConnection` (no sockets).

Each live figure is the lowest of ``--repeat`` runs (other programs on the cores only ever
add CPU time). The figures are compared with the newest entry of
``bench/results/load_cost.json``: one more than 20 % above it prints ``REGRESSION`` and the
script exits 1. ``--record`` appends this run (with the machine's description and load) as
the new reference — commit the file.

The streamed figures move between runs with no code changed (by up to 25 % within minutes
on this 2-core VM, idle or not): each chunk costs a wake-up whose price depends on the host
and the other programs — and a *busier* machine gives lower figures, since several chunks
then wait for one wake-up (1.1–1.3 ms at load average 5–10 against 1.6–1.85 idle). Compare
``stream_cpu_ms_per_request`` with the floor printed in the same run, re-run a REGRESSION
before believing it, and record references on an idle machine.

    PYTHONPATH=src .venv/bin/python bench/load_cost.py [--requests 1000] [--repeat 5]
        [--record] [--only parse,floor,stream,sessions,instant,tgis,grpc]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from testbed.clients import openai
from testbed.clients import tgis as tgis_client
from testbed.clients.endpoint import Endpoint
from testbed.clients.grpc_channel import GrpcChannel, split_target, tcp
from testbed.clients.grpc_h2 import GrpcConnection
from testbed.clients.http1 import CONNECTION, Http1Connection
from testbed.clients.response import StreamSink
from testbed.config.load import LoadProbe
from testbed.probes.base import ProbeContext
from testbed.probes.load import run
from testbed.probes.load.loops import run_fast
from testbed.results.files import RecordWriter

RESULTS = Path(__file__).resolve().parent / "results" / "load_cost.json"
TOLERANCE = 0.20
#: Figures of the machine, not of testbed's code: printed and recorded, never a REGRESSION.
MACHINE = {"floor_cpu_ms_per_request"}
TICK = os.sysconf("SC_CLK_TCK")


class Sim:
    """``testbed serve sim`` as a child whose CPU time can be read."""

    def __init__(self, ttft_ms: float, itl_ms: float) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.grpc_port = int(sock.getsockname()[1])
        cmd = [sys.executable, "-m", "testbed", "serve", "sim", "--port", "0"]
        cmd += ["--ttft-ms", str(ttft_ms), "--itl-ms", str(itl_ms)]
        cmd += ["--protocols", "openai,tgi,tgis", "--grpc-port", str(self.grpc_port)]
        self.child = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert self.child.stdout is not None
        line = ""
        while "listening on" not in line:
            line = self.child.stdout.readline()
            if not line:
                raise SystemExit("the simulator did not start")
        self.url = line.rsplit(" ", 1)[-1].strip()

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.child.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK

    def endpoint(self) -> Endpoint:
        return Endpoint(
            self.url,
            protocols=("openai", "tgi", "tgis"),
            grpc_target=f"127.0.0.1:{self.grpc_port}",
        )

    def close(self) -> None:
        self.child.terminate()
        self.child.wait(timeout=10)


#: The plain figures' prompts: 128 tokens in, 64 out.
PLAIN = {"input_tokens": 128, "output_tokens": 64}
#: The multi-turn figure's: sessions of 4 turns, each 128 new tokens and 64 out, the history
#: sent again with every turn (completions: the prompt grows by each answer).
SESSIONS = {"kind": "sessions", "sessions": 500, "turns": 4, **PLAIN}


def load(
    sim: Sim, api: str, concurrency: int, requests: int, dataset: dict[str, Any] = PLAIN
) -> dict[str, Any]:
    """One closed-loop stage of ``requests`` 64-token streamed requests; the stage summary."""
    config = LoadProbe.model_validate(
        {
            "api": api,
            "concurrency": concurrency,
            "requests": requests,
            "duration_s": 3600,
            "dataset": dataset,
            "plots": False,
            "server_metrics": {"enabled": False},
        }
    )
    with tempfile.TemporaryDirectory() as out, RecordWriter(Path(out) / "r.jsonl") as records:
        ctx = ProbeContext({"sim": sim.endpoint()}, config, Path(out), records)
        summary = run_fast(run(ctx)).summary
    stage: dict[str, Any] = summary["stages"][0] if "stages" in summary else summary
    counts = stage["requests"]
    if counts["errors"]:
        raise SystemExit(f"{api}: {counts['errors']} requests failed: {counts['top_errors']}")
    return stage


def stream_bytes(url: str) -> list[bytes]:
    """The reads of one 64-token stream as the simulator sends it: the head, then each HTTP
    chunk (one token's event, or a few) as its own read."""
    body = json.dumps(
        {"model": "sim-model", "prompt": "a b c", "max_tokens": 64, "stream": True}
        | {"stream_options": {"include_usage": True}, "ignore_eos": True}
    ).encode()
    request = urllib.request.Request(
        f"{url}/v1/completions", body, {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        chunks = []  # urllib undoes the chunking: re-frame each event as the server does
        text = response.read()
    for event in text.split(b"\n\n"):
        if event:
            data = event + b"\n\n"
            chunks.append(b"%x\r\n%s\r\n" % (len(data), data))
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    )
    return [head, *chunks, b"0\r\n\r\n"]


def parse_cost(reads: list[bytes], rounds: int = 3000, *, python: bool = False) -> float:
    """µs of CPU per read to frame, parse and decode ``reads`` (one response) ``rounds`` times:
    by what the pool and ``openai.sink`` use, or (``python``) by the Python classes alone."""
    connection = Http1Connection if python else CONNECTION

    def make_sink() -> Any:
        if python:
            return StreamSink(openai.decode_chunk, ending=openai.ENDING)
        return openai.sink(stream=True)

    class Transport:
        def write(self, data: bytes) -> None:
            del data

    async def main() -> float:
        loop = asyncio.get_running_loop()
        conn = connection()
        conn.connection_made(Transport())  # type: ignore[arg-type]
        t0 = time.process_time()
        for _ in range(rounds):
            sink = make_sink()
            done = loop.create_future()
            conn.start(b"", sink, done)
            for data in reads:
                conn.data_received(data)
            if not (done.done() and sink.response.ok and len(sink.response.chunks) == 64):
                raise SystemExit(f"scripted stream not parsed: {sink.response.error}")
        return (time.process_time() - t0) / rounds / (len(reads) - 2) * 1e6

    return asyncio.run(main())


GENERATE_STREAM = f"/{tgis_client.SERVICE}/GenerateStream"


def grpc_reads(target: str) -> tuple[bytes, list[bytes]]:
    """A streamed request's bytes and the reads of one connection that carried it twice
    (the second answer's header blocks refer to the table the first one filled)."""
    stopping = {"max_new_tokens": 64, "min_new_tokens": 64}
    body = {"requests": [{"text": "a b c"}], "params": {"stopping": stopping}}
    payload = tgis_client.encode(body, stream=True)
    reads: list[bytes] = []

    class Recording(GrpcConnection):
        def data_received(self, data: bytes) -> None:
            reads.append(data)
            super().data_received(data)

    async def main() -> None:
        connect = tcp(*split_target(target))
        channel = GrpcChannel(target, connector=lambda _: connect(Recording))
        try:
            for _ in range(2):
                await channel.call(GENERATE_STREAM, payload, lambda data, t_ns: None, 30)
        finally:
            await channel.aclose()

    asyncio.run(main())
    return payload, reads


def grpc_parse_cost(payload: bytes, reads: list[bytes], rounds: int = 300) -> float:
    """µs of CPU per message to frame, decode and sink the answers in ``reads``."""

    class Transport:
        def write(self, data: bytes) -> None:
            del data

        def close(self) -> None: ...

    async def main() -> float:
        messages = 0
        t0 = time.process_time()
        for _ in range(rounds):
            conn = GrpcConnection()
            conn.connection_made(Transport())  # type: ignore[arg-type]
            feed = iter(reads)
            for _ in range(2):
                sink = tgis_client.sink(stream=True)
                stream = conn.open(b"", payload, tgis_client.stream_reader(sink))
                while not stream.done.done():
                    conn.data_received(next(feed))
                sink.on_end(0)
                if not (sink.response.ok and len(sink.response.chunks) == 64):
                    raise SystemExit(f"recorded gRPC stream not parsed: {sink.response.error}")
                messages += sink.response.events
        return (time.process_time() - t0) / messages * 1e6

    return asyncio.run(main())


#: The streamed figure's request (64 tokens whatever the model says).
STREAM_BODY = {"model": "sim-model", "prompt": "w " * 128, "max_tokens": 64, "ignore_eos": True}


def usage_since(r0: Any, n: int) -> dict[str, float]:
    """CPU ms (and its user and system parts) and voluntary context switches (each a sleep
    in epoll: a wake-up) per request since the ``getrusage`` reading ``r0``, over ``n``."""
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    user, system = r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime
    return {
        "cpu": (user + system) * 1e3 / n,
        "user": user * 1e3 / n,
        "sys": system * 1e3 / n,
        "wakeups": (r1.ru_nvcsw - r0.ru_nvcsw) / n,
    }


def floor_cost(sim: Sim, requests: int, concurrency: int = 32) -> dict[str, float]:
    """A bare protocol reading the streamed figure's streams (same simulator, 64 tokens,
    c=32) and parsing nothing: what this machine charges for the reads and the event loop's
    wake-ups alone (:func:`usage_since`'s figures, and ``reads`` per request). Not a figure of
    testbed's code: the floor under ``stream_cpu_ms_per_request``."""
    host, port = sim.url.removeprefix("http://").rsplit(":", 1)

    async def main() -> dict[str, float]:
        from testbed.clients.http import ConnectionPool

        payload = openai.encode(ConnectionPool(sim.url), "completions", STREAM_BODY, stream=True)
        loop = asyncio.get_running_loop()
        finished = loop.create_future()
        counts = {"done": 0, "reads": 0}
        warm = concurrency  # every connection's first request is not counted

        class Bare(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                self.transport = transport
                transport.write(payload)  # type: ignore[attr-defined]

            def data_received(self, data: bytes) -> None:
                time.perf_counter_ns()  # the one thing every read must do: its timestamp
                counts["reads"] += 1
                if data.endswith(b"\r\n0\r\n\r\n") or data == b"0\r\n\r\n":
                    counts["done"] += 1
                    if counts["done"] == warm:
                        start.append(resource.getrusage(resource.RUSAGE_SELF))
                        counts["reads"] = 0
                    if counts["done"] >= warm + requests:
                        if not finished.done():
                            finished.set_result(None)
                        return
                    self.transport.write(payload)  # type: ignore[attr-defined]

        start: list[Any] = []
        for _ in range(concurrency):
            await loop.create_connection(Bare, host, int(port))
        await finished
        n = counts["done"] - warm
        return usage_since(start[0], n) | {"reads": counts["reads"] / n}

    return run_fast(main())


def best(repeat: int, measure: Callable[[], dict[str, float]]) -> dict[str, float]:
    """The lowest value of each figure over ``repeat`` runs."""
    runs = [measure() for _ in range(repeat)]
    return {key: min(r[key] for r in runs) for key in runs[0]}


def measure_all(args: argparse.Namespace) -> dict[str, float]:
    figures: dict[str, float] = {}
    only = (
        set(args.only.split(","))
        if args.only
        else {"parse", "floor", "stream", "sessions", "instant", "tgis", "grpc"}
    )
    sim = Sim(20.0, 5.0)
    try:
        if "parse" in only:
            reads = stream_bytes(sim.url)
            figures |= best(
                args.repeat,
                lambda: {
                    "parse_us_per_chunk": parse_cost(reads),
                    "parse_python_us_per_chunk": parse_cost(reads, python=True),
                },
            )
        if "floor" in only:
            figures |= best(
                args.repeat,
                lambda: {"floor_cpu_ms_per_request": floor_cost(sim, args.requests)["cpu"]},
            )
        if "stream" in only:

            def stream() -> dict[str, float]:
                stage = load(sim, "completions", 32, args.requests)
                return {"stream_cpu_ms_per_request": stage["harness"]["cpu_ms_per_request"]}

            figures |= best(args.repeat, stream)
        if "sessions" in only:

            def sessions() -> dict[str, float]:
                stage = load(sim, "completions", 32, args.requests, SESSIONS)
                return {"sessions_cpu_ms_per_request": stage["harness"]["cpu_ms_per_request"]}

            figures |= best(args.repeat, sessions)
        if "tgis" in only:

            def tgis_stream() -> dict[str, float]:
                stage = load(sim, "tgis", 32, args.requests)
                return {"tgis_stream_cpu_ms_per_request": stage["harness"]["cpu_ms_per_request"]}

            figures |= best(args.repeat, tgis_stream)
    finally:
        sim.close()
    sim = Sim(0.0, 0.0)
    try:
        if "instant" in only:

            def instant() -> dict[str, float]:
                cpu0 = sim.cpu_s()
                stage = load(sim, "completions", 32, args.requests)
                done = stage["requests"]["ok"]
                return {
                    "instant_cpu_ms_per_request": stage["harness"]["cpu_ms_per_request"],
                    "sim_cpu_ms_per_request": (sim.cpu_s() - cpu0) * 1e3 / done,
                }

            figures |= best(args.repeat, instant)
        if "tgis" in only:

            def tgis() -> dict[str, float]:
                stage = load(sim, "tgis", 8, max(200, args.requests // 3))
                return {"tgis_cpu_ms_per_request": stage["harness"]["cpu_ms_per_request"]}

            figures |= best(args.repeat, tgis)
        if "grpc" in only:
            payload, reads = grpc_reads(f"127.0.0.1:{sim.grpc_port}")
            figures |= best(
                args.repeat,
                lambda: {"tgis_parse_us_per_message": grpc_parse_cost(payload, reads)},
            )
    finally:
        sim.close()
    return figures


def machine() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "system": platform.platform(),
    }


def compare(figures: dict[str, float], history: list[dict[str, Any]]) -> list[str]:
    """The figures more than :data:`TOLERANCE` worse than the newest recorded ones."""
    if not history:
        return []
    last = history[-1]["figures"]
    return [
        f"{name}: {value:.3f} vs {last[name]:.3f} recorded ({value / last[name] - 1:+.0%})"
        for name, value in figures.items()
        if name in last
        and name not in MACHINE
        and last[name] > 0
        and value > last[name] * (1 + TOLERANCE)
    ]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--only",
        default="",
        help="parse,floor,stream,sessions,instant,tgis,grpc (default: all)",
    )
    parser.add_argument("--record", action="store_true", help="append this run as the reference")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    figures = measure_all(args)
    history = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
    last = history[-1]["figures"] if history else {}
    print(f"load average {load_before:.1f} → {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'figure':30}{'now':>10}{'recorded':>10}")
    for name, value in figures.items():
        print(f"{name:30}{value:10.3f}{last.get(name, float('nan')):10.3f}")
    worse = compare(figures, history)
    for line in worse:
        print(f"REGRESSION {line}")
    if args.record:
        entry = {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "load_average": round(load_before, 2),
            "requests": args.requests,
            "repeat": args.repeat,
            "machine": machine(),
            "figures": {k: round(v, 4) for k, v in figures.items()},
        }
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps([*history, entry], indent=2) + "\n")
        print(f"recorded in {RESULTS}")
    return 1 if worse else 0


if __name__ == "__main__":
    raise SystemExit(main())
