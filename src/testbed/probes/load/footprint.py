"""What one load test asks of this machine, checked before it starts.

A load test holds, in the process that runs it: one open file (a socket) per request in
flight, the prompts and their encoded requests, and every record of every stage until the
summary is written; each extra load process costs an interpreter. A number too large for
this machine — ``concurrency: 1000000000``, a rate of a trillion per second — is refused at
validation (exit 2) with the numbers and the fix, instead of ending in "Too many open
files" blamed on the server, a MemoryError after a minute, or a segfault.

The costs are estimates with margin, measured with ``testbed load`` against the simulator
(``docs/load.md``, Limits): about 5 KiB per plain connection in flight, 1 KiB per record
plus 40 bytes per streamed token, ~60 MB per load process. The check is one function for
the campaign's ``load:`` sections (``testbed validate`` / ``run``) and ``testbed load``'s
flags alike; it names the field, and each caller says where the field was written.
"""

from __future__ import annotations

import math
import resource

from testbed.config.lengths import FixedLength, Length, NormalLength, UniformLength
from testbed.config.load import DEFAULT_DURATION_S, LoadProbe
from testbed.config.workload import TraceDataset
from testbed.probes.limits import Excess, Limits, memory_excess

IN_FLIGHT_BYTES = 32 * 1024  # a connection, its protocol objects and TLS buffers
RECORD_BYTES = 1024  # one record's dict, before its chunk timestamps
TOKEN_RECORD_BYTES = 48  # one streamed chunk's timestamp in a record
PROMPT_TOKEN_BYTES = 16  # a prompt token as text and again in the encoded request
PROCESS_BYTES = 64 * 1024 * 1024  # one load process (an interpreter with testbed loaded)
STAGE_BYTES = 1024  # one planned stage of a sweep
RESERVED_FILES = 64  # the interpreter's own files, record files, timers, metric scrapes


def excess(config: LoadProbe, limits: Limits) -> Excess | None:
    """The first field of ``config`` this machine cannot hold, or None."""
    return _files(config, limits) or _memory(config, limits)


def raise_open_files(needed: int) -> None:
    """Raise this process's soft open-file limit toward the hard one, as far as ``needed``
    (load processes started after inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    if soft != resource.RLIM_INFINITY and want > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def open_files_needed(config: LoadProbe) -> int:
    """Files one load process of ``config`` may hold open at once (the first one also has
    three pipes to each of the others)."""
    return _in_flight(config)[1] + RESERVED_FILES + 3 * (config.processes - 1)


def _in_flight(config: LoadProbe) -> tuple[str, int]:
    """The field that sets the requests in flight in one load process, and how many."""
    if config.profile in ("rate", "ramp", "trace"):
        return "max_in_flight", config.max_in_flight
    closed, field = config.concurrency, "concurrency"
    if config.profile == "synchronous":
        closed = 1
    if config.profile == "sweep":
        closed, field = config.sweep.max_concurrency, "sweep.max_concurrency"
        if config.max_in_flight > math.ceil(closed / config.processes):
            return "max_in_flight", config.max_in_flight
    return field, math.ceil(closed / config.processes)


def _files(config: LoadProbe, limits: Limits) -> Excess | None:
    parent = RESERVED_FILES + 3 * config.processes  # three pipes to each load process
    if config.processes > 1 and parent > limits.open_files:
        return Excess(
            "processes",
            f"{config.processes:,} load processes need {parent:,} open files in the process"
            f" that starts them, but this machine allows {limits.open_files:,} (ulimit -Hn)"
            " — use fewer (one per core is plenty)",
        )
    field, per_process = _in_flight(config)
    needed = open_files_needed(config)
    if needed <= limits.open_files:
        return None
    room = max(1, limits.open_files - needed + per_process)
    total = config.sweep.max_concurrency if field.startswith("sweep.") else getattr(config, field)
    processes = math.ceil(total / room)
    spread = ""
    if field != "max_in_flight" and processes * PROCESS_BYTES < limits.memory_bytes / 2:
        spread = f", spread it over processes: {processes:,} (each opens its share)"
    return Excess(
        field,
        f"{total:,} requests in flight need {needed:,} open files in a load process"
        f" ({per_process:,} connections and {needed - per_process:,} of its own), but this"
        f" machine allows {limits.open_files:,} (ulimit -Hn) — lower it to at most"
        f" {room * config.processes:,}{spread}, or raise the limit (ulimit -n, limits.conf)",
    )


def _largest(length: Length | None, default: int) -> int:
    if length is None:
        return default
    if isinstance(length, FixedLength):
        return length.value
    if isinstance(length, UniformLength):
        return length.max
    if isinstance(length, NormalLength):
        return length.max or math.ceil(length.mean + 6 * length.std)
    return max(length.values)


def _memory(config: LoadProbe, limits: Limits) -> Excess | None:
    """The biggest part of the estimate names the field, when the sum is too much."""
    ds = config.dataset
    # a trace's lengths are its rows' (read at the run), 64 tokens a guess as for a file's
    out_tokens = _largest(None if isinstance(ds, TraceDataset) else ds.output_tokens, 64)
    per_record = RECORD_BYTES + TOKEN_RECORD_BYTES * out_tokens * (2 if config.keep_text else 1)
    field, in_flight = _in_flight(config)
    parts: list[tuple[str, float, str]] = [
        (field, in_flight * config.processes * IN_FLIGHT_BYTES, "requests in flight"),
        ("processes", config.processes * PROCESS_BYTES, "load processes"),
    ]
    stages, per_stage, bound = _records(config)
    if per_stage is not None:
        parts.append((bound, stages * per_stage * per_record, "records kept until the summary"))
    if config.profile == "sweep":
        parts.append(("sweep.rates", config.sweep.rates * STAGE_BYTES, "planned stages"))
    if ds.kind == "synthetic":
        tokens = _largest(ds.input_tokens, 128) + ds.prefix_tokens
        parts += [
            (
                "dataset.samples" if ds.samples > tokens else "dataset.input_tokens",
                ds.samples * tokens * PROMPT_TOKEN_BYTES,
                f"{ds.samples:,} prompts and their requests",
            ),
            (
                "dataset.prefix_groups",
                ds.prefix_groups * ds.prefix_tokens * PROMPT_TOKEN_BYTES,
                "shared prefixes",
            ),
        ]
    return memory_excess(parts, limits, "load test")


def _records(config: LoadProbe) -> tuple[int, float | None, str]:
    """Stages, records per stage (None: unknown before the run) and the field bounding them."""
    if config.stages is not None:
        return _listed_records(config)
    stages = 2 + config.sweep.rates if config.profile == "sweep" else 1
    open_loop: float | None = None
    if config.profile in ("rate", "ramp") and config.stage_duration_s is not None:
        rate = config.rate or 0.0
        if config.profile == "ramp":
            rate = (config.ramp.start_rate + config.ramp.end_rate) / 2
        open_loop = rate * config.stage_duration_s
    if config.requests is not None and (open_loop is None or config.requests <= open_loop):
        return stages, float(config.requests), "requests"
    if open_loop is not None:
        return stages, open_loop, "ramp.end_rate" if config.profile == "ramp" else "rate"
    return stages, None, "requests"


def _listed_records(config: LoadProbe) -> tuple[int, float | None, str]:
    """A stage list's: its length, and its largest stage's records (its count, or at most
    its rate times its duration)."""
    assert config.stages is not None
    largest = 0.0
    for stage in config.stages:
        duration, requests = stage.bounds(config.duration_s, config.requests, DEFAULT_DURATION_S)
        bounds = [b for b in (requests, None if duration is None else stage.rate * duration) if b]
        largest = max(largest, min(bounds))
    return len(config.stages), largest, "stages"
