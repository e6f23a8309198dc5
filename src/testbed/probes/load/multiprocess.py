"""Several load processes for one stage, each with its own event loop; records merged exactly.

One core runs out near a few thousand streamed requests per second. With ``processes: N``
each stage starts N children (``python -m testbed.probes.load.multiprocess SPEC``). A child
builds its pool and payloads, says ``ready``, waits for ``go T0``, and runs its share of the
stage from the common origin T0: closed-loop workers are split between children, open-loop
arrivals of the one seeded schedule are dealt round-robin. ``CLOCK_MONOTONIC`` is
system-wide, so the children's raw timestamps share one time axis and their records merge
by simple concatenation. Each child writes records to its own part file as they complete;
when the stage ends (also when it fails) the parent appends them to the treatment's records,
and only then removes the part files.

The API key never goes into the spec file: a literal key is handed to the children in the
``TESTBED_LOAD_API_KEY`` environment variable.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kubefacts.process_group import signal_child
from testbed.clients.apis import APIS
from testbed.core.clock import monotonic_ns
from testbed.core.errors import InfrastructureError
from testbed.probes.load.runner import StageRun
from testbed.results import metrics
from testbed.results.files import read_records

_KEY_ENV = "TESTBED_LOAD_API_KEY"
_READY_TIMEOUT_S = 60.0
_START_MARGIN_NS = 50_000_000  # children get the go 50 ms before T0


@dataclass(frozen=True)
class _ChildFiles:
    """The files of one child. Names are built by appending, never with
    ``Path.with_suffix``: a stage name such as ``rate-12.5`` has a dot of its own."""

    stem: Path

    def _with(self, ending: str) -> Path:
        return self.stem.parent / f"{self.stem.name}{ending}"

    @property
    def spec(self) -> Path:
        return self._with(".spec.json")

    @property
    def part(self) -> Path:
        return self._with(".jsonl")

    @property
    def run(self) -> Path:
        return self._with(".run.json")

    @property
    def err(self) -> Path:
        return self._with(".err")

    def remove(self) -> None:
        for path in (self.spec, self.part, self.run, self.err):
            path.unlink(missing_ok=True)


async def run_stage(
    base_spec: dict[str, Any],
    stage_json: dict[str, Any],
    *,
    processes: int,
    seed: int,
    workdir: Path,
    api_key: str | None,
    sink: Callable[[dict[str, Any]], None],
) -> tuple[StageRun, list[dict[str, Any]]]:
    """Run one stage in ``processes`` children; the merged harness facts and records.

    Every record the children wrote goes to ``sink`` (the treatment's records.jsonl) before
    any part file is removed — also when a child fails or the stage is interrupted. If the
    sink itself fails, the part files stay on disk.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if api_key:
        env[_KEY_ENV] = api_key
    name = stage_json["name"]
    files = [_ChildFiles(workdir / f".load-{name}-{p}") for p in range(processes)]
    children: list[asyncio.subprocess.Process] = []
    try:
        for proc, child_files in enumerate(files):
            spec = {**base_spec, "stage": stage_json, "seed": seed, "proc": proc}
            spec.update(procs=processes, part=str(child_files.part), run=str(child_files.run))
            children.append(await _start(spec, child_files, env))
        for child, child_files in zip(children, files, strict=True):
            await _expect_ready(child, child_files)
        t0 = monotonic_ns() + _START_MARGIN_NS
        for child in children:
            assert child.stdin is not None
            child.stdin.write(f"go {t0}\n".encode())
            await child.stdin.drain()
        for child, child_files in zip(children, files, strict=True):
            if await child.wait() != 0:
                raise InfrastructureError(f"load process failed: {_tail(child_files)}")
        runs = [StageRun(**json.loads(f.run.read_text(encoding="utf-8"))) for f in files]
    finally:
        await _stop_all(children)
        records = _hand_over(files, sink)
        for child_files in files:
            child_files.remove()
    return _merged_run(runs, processes), records


async def _start(
    spec: dict[str, Any], files: _ChildFiles, env: dict[str, str]
) -> asyncio.subprocess.Process:
    files.spec.write_text(json.dumps(spec), encoding="utf-8")
    with files.err.open("wb") as err:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "testbed.probes.load.multiprocess",
            str(files.spec),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=err,
            env=env,
        )


async def _expect_ready(child: asyncio.subprocess.Process, files: _ChildFiles) -> None:
    assert child.stdout is not None
    try:
        async with asyncio.timeout(_READY_TIMEOUT_S):
            line = await child.stdout.readline()
    except TimeoutError:
        line = b""
    if line.strip() != b"ready":
        await child.wait()
        raise InfrastructureError(f"load process did not start: {_tail(files)}")


def _tail(files: _ChildFiles) -> str:
    path = files.err
    text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
    return text.strip()[-800:] or "(no output)"


async def _stop_all(children: list[asyncio.subprocess.Process]) -> None:
    """Politely, then surely (STYLE.md habit 12)."""
    for child in children:
        if child.returncode is None:
            signal_child(child, signal.SIGTERM)  # not terminate(): see signal_child
    for child in children:
        if child.returncode is None:
            try:
                async with asyncio.timeout(3):
                    await child.wait()
            except TimeoutError:
                signal_child(child, signal.SIGKILL)
                await child.wait()


def _hand_over(
    files: list[_ChildFiles], sink: Callable[[dict[str, Any]], None]
) -> list[dict[str, Any]]:
    """The children's records, merged in send order, each given to ``sink``. A torn last
    line (a child killed mid-write) is not a record."""
    parts = [read_records(f.part) for f in files]
    merged: list[dict[str, Any]] = metrics.merge(parts)  # type: ignore[assignment]
    for record in merged:
        sink(record)
    return merged


def _merged_run(runs: list[StageRun], processes: int) -> StageRun:
    return StageRun(
        name=runs[0].name,
        t_start_ns=min(r.t_start_ns for r in runs),
        t_stop_ns=max(r.t_stop_ns for r in runs),
        t_end_ns=max(r.t_end_ns for r in runs),
        sent=sum(r.sent for r in runs),
        cpu_s=sum(r.cpu_s for r in runs),
        wall_s=max(r.wall_s for r in runs),
        lags_ns=[lag for r in runs for lag in r.lags_ns],
        capped=sum(r.capped for r in runs),
        requested_rate=runs[0].requested_rate,
        precise_timer=all(r.precise_timer for r in runs),
        processes=processes,
        cpu_fraction_max=max(r.cpu_fraction_max for r in runs),
        load_average=runs[0].load_average,
    )


# -- the child -----------------------------------------------------------------------------


def _pools(spec: dict[str, Any], key: str | None) -> tuple[Any, Any]:
    """The child's HTTP pool (it encodes every request) and what sends them: that pool, or
    the gRPC channel of an API spoken over gRPC."""
    from testbed.clients.endpoint import Tls
    from testbed.clients.http import ConnectionPool
    from testbed.clients.tgis import TgisPool
    from testbed.probes.shaping import resolved

    shaped = resolved(spec["headers"])
    auth = {"Authorization": f"Bearer {key}"} if key else {}
    pool = ConnectionPool(spec["base_url"], headers={**auth, **shaped}, tls=Tls(**spec["tls"]))
    if not APIS[spec["api"]].grpc:
        return pool, pool
    metadata = tuple((name.lower(), value) for name, value in shaped.items())
    return pool, TgisPool(spec["grpc_target"], api_key=key, metadata=metadata)


async def _child(spec: dict[str, Any]) -> None:
    import orjson

    from testbed.probes.load import dataset
    from testbed.probes.load.recording import BackgroundWriter
    from testbed.probes.load.runner import Options, Stage
    from testbed.probes.load.tokens import counter_from_spec
    from testbed.probes.load.workload import factory_in_child
    from testbed.probes.shaping import secret_values

    key = os.environ.get(_KEY_ENV)
    pool, sender = _pools(spec, key)
    api = APIS[spec["api"]]
    items = [dataset.Item(**item) for item in spec["items"]]
    payloads = dataset.encode(
        items,
        pool,
        api=api,
        model=spec["model"],
        stream=spec["stream"],
        ignore_eos=spec["ignore_eos"],
        extra_body=spec["extra_body"],
    )
    refs = [spec["headers"], *(item.headers for item in items if item.headers)]
    secrets = [*secret_values(refs), *([key] if key else [])]
    options = Options(**spec["options"], proc=spec["proc"], procs=spec["procs"])
    loop = asyncio.get_running_loop()
    with open(spec["part"], "wb") as part:  # noqa: ASYNC230 - one open before the stage

        def append(line: bytes) -> None:
            part.write(line)
            part.flush()

        to_disk: BackgroundWriter | None = None

        def write(record: dict[str, Any]) -> None:
            assert to_disk is not None
            to_disk(orjson.dumps(record) + b"\n")

        counter = counter_from_spec(spec["counter"])
        generator = factory_in_child(spec, pool)(
            sender, items, payloads, counter, write, options, secrets=secrets
        )
        stage = Stage.from_json(spec["stage"])
        await generator.prepare(stage, spec["seed"])
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        line = await loop.run_in_executor(None, sys.stdin.readline)
        t0 = int(line.split()[1])
        to_disk = BackgroundWriter(append)
        try:
            run = await generator.run(stage, t0_ns=t0, seed=spec["seed"])
        finally:
            to_disk.close()
    await pool.aclose()
    if sender is not pool:
        await sender.aclose()
    Path(spec["run"]).write_text(json.dumps(asdict(run)), encoding="utf-8")


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    from testbed.probes.load.loops import run_fast

    run_fast(_child(spec))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
