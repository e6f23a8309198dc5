"""Trace replay: a timestamped trace's requests, sent at the trace's own offsets.

Formats (``dataset.format``):

- ``mooncake`` — Mooncake's published traces (kvcache-ai/Mooncake, FAST'25): JSON lines of
  ``timestamp`` (ms since the trace's first request; equal for simultaneous arrivals),
  ``input_length`` and ``output_length`` (tokens) and ``hash_ids``: the prompt's blocks of
  ``block_tokens`` (512) tokens, where an id shared by two requests means the same block
  content — a shared prefix.
- ``jsonl`` / ``csv`` — a row per request with ``time_s`` (or ``timestamp`` in ms),
  ``input_tokens`` (or ``input_length``), ``output_tokens`` (or ``output_length``) and
  optionally ``prompt`` (sent as it is) or ``hash_ids``.

Prompts are built so that the server's prefix cache sees what production saw: each hash id
is one block of text of exactly ``block_tokens`` tokens, generated from the seed and the
id alone, so equal ids are equal tokens wherever they appear; the last block of a prompt
that is not a multiple of the block is cut to its length, and a prompt longer than its
ids is padded with text of its own.

Timing: trace time is a row's time minus the first row's. The window keeps rows with
``start_s ≤ t < end_s``; an offset is ``(t − start_s) / speed``. With ``loop`` the window
repeats every period (its length ``end_s − start_s``, or unset: its last offset plus one
mean gap) until the stage's ``duration_s`` or ``requests``. Request *k* sends row *k* of
the window (modulo its length) at offset *k*; the runner's self-check reports the lag.
"""

from __future__ import annotations

import csv
import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed.config.load import LoadProbe
from testbed.config.workload import TraceDataset
from testbed.core.errors import InputError
from testbed.probes.load.dataset import Item, read_rows
from testbed.probes.load.runner import Stage
from testbed.probes.load.schedule import Arrivals
from testbed.probes.load.tokens import TokenCounter


@dataclass(frozen=True, slots=True)
class Row:
    """One request of a trace: its time (s of trace time), lengths, prompt or blocks."""

    time_s: float
    input_tokens: int
    output_tokens: int
    prompt: str | None = None
    hash_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class Trace:
    """A trace's window as the load sends it: items in order and their offsets (ns)."""

    items: list[Item]
    offsets_ns: list[int]
    period_ns: int  # the window's length, for looping


def load(ds: TraceDataset, counter: TokenCounter, seed: int, base_dir: Path) -> Trace:
    """Read the trace, keep its window and build its prompts."""
    rows, offsets, period = _window(ds, base_dir)
    return Trace(_prompts(rows, ds, counter, seed), offsets, period)


def timing(ds: TraceDataset, base_dir: Path) -> tuple[list[int], int]:
    """The window's send offsets and period (ns), without building its prompts."""
    _, offsets, period = _window(ds, base_dir)
    return offsets, period


def _window(ds: TraceDataset, base_dir: Path) -> tuple[list[Row], list[int], int]:
    path = base_dir / ds.path
    if not path.is_file():
        what = "is a directory, not a file" if path.is_dir() else "does not exist"
        raise InputError(f"dataset.path: trace file {str(path)!r} {what}")
    raw = _csv_rows(path) if ds.format == "csv" else read_rows(path)
    rows = sorted((_row(r, n, ds) for n, r in enumerate(raw, 1)), key=lambda r: r.time_s)
    if not rows:
        raise InputError(f"dataset.path: trace {ds.path!r} has no requests")
    origin = rows[0].time_s
    end = math.inf if ds.end_s is None else ds.end_s
    kept = [r for r in rows if ds.start_s <= r.time_s - origin < end]
    if not kept:
        span = rows[-1].time_s - origin
        raise InputError(
            f"dataset: the window start_s {ds.start_s:g} s .. end_s {ds.end_s} holds no"
            f" request of {ds.path!r} (its requests span 0 .. {span:g} s of trace time)"
        )
    offsets = [round((r.time_s - origin - ds.start_s) / ds.speed * 1e9) for r in kept]
    if ds.end_s is not None:
        period = round((ds.end_s - ds.start_s) / ds.speed * 1e9)
    else:  # the last offset and one mean gap, so the loop's seam keeps the trace's pace
        gap = offsets[-1] // (len(offsets) - 1) if len(offsets) > 1 else 1_000_000_000
        period = offsets[-1] + gap
    return kept, offsets, max(period, 1)


def schedule(
    trace: Trace, *, loop: bool, duration_s: float | None, requests: int | None
) -> list[int]:
    """Every send offset of the stage: the window once, or looped until the duration or
    the request count (whichever comes first)."""
    horizon = math.inf if duration_s is None else duration_s * 1e9
    limit = requests if requests is not None else (math.inf if loop else len(trace.offsets_ns))
    out: list[int] = []
    rounds = 0
    while len(out) < limit:
        for offset in trace.offsets_ns:
            t = offset + rounds * trace.period_ns
            if t >= horizon or len(out) >= limit:
                return out
            out.append(t)
        if not loop:
            return out
        rounds += 1
    return out


def stage(config: LoadProbe, trace: Trace) -> Stage:
    """The one stage of ``profile: trace``: open loop at the trace's offsets, bounded by its
    own length (a count-ended stage, so its window ends at the last send)."""
    ds = config.dataset
    assert isinstance(ds, TraceDataset)
    offsets = schedule(trace, loop=ds.loop, duration_s=config.duration_s, requests=config.requests)
    span_s = offsets[-1] / 1e9 if offsets else 0.0
    rate = (len(offsets) - 1) / span_s if span_s > 0 else float(len(offsets))
    arrivals = Arrivals(rate=rate, arrival="trace", offsets=tuple(offsets))
    name = f"trace-x{ds.speed:g}" if ds.speed != 1 else "trace"
    return Stage(
        name=name,
        arrivals=arrivals,
        duration_s=None,
        max_requests=len(offsets),
        warmup_s=config.warmup_s,
        cooldown_s=config.cooldown_s,
    )


def _csv_rows(path: Path) -> list[dict[str, Any]]:
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            return list(csv.DictReader(handle))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"dataset.path: trace {path}: cannot read it as CSV ({exc})") from None


_TIME = ("time_s", "timestamp")
_INPUT = ("input_tokens", "input_length")
_OUTPUT = ("output_tokens", "output_length")


def _row(raw: Any, number: int, ds: TraceDataset) -> Row:
    """One row, checked: times ≥ 0, lengths ≥ 1 (a prompt given sets the input itself)."""
    where = f"{ds.path}: row {number}"
    if not isinstance(raw, dict):
        raise InputError(f"{where}: not an object with {', '.join(_TIME + _INPUT + _OUTPUT)}")
    prompt = raw.get("prompt") or None
    if prompt is not None and not isinstance(prompt, str):
        raise InputError(f"{where}: 'prompt' must be a string")
    time_s = _number(raw, "timestamp", where) / 1e3 if "timestamp" in raw else None
    if time_s is None:
        time_s = _number(raw, "time_s", where)
    inp = next((k for k in _INPUT if k in raw and raw[k] not in ("", None)), None)
    if inp is None and prompt is None:
        raise InputError(f"{where}: needs input_length (or input_tokens) or a prompt")
    out = next((k for k in _OUTPUT if k in raw and raw[k] not in ("", None)), None)
    if out is None:
        raise InputError(f"{where}: needs output_length (or output_tokens)")
    hash_ids = raw.get("hash_ids") or ()
    if isinstance(hash_ids, str):  # a CSV cell: "1 2 3" or "[1, 2, 3]"
        hash_ids = hash_ids.strip("[]").replace(",", " ").split()
    try:
        ids = tuple(int(h) for h in hash_ids)
    except (TypeError, ValueError):
        raise InputError(f"{where}: hash_ids must be a list of integers") from None
    n_in = int(_number(raw, inp, where)) if inp else 0
    n_out = int(_number(raw, out, where))
    if (inp and n_in < 1) or n_out < 1:
        raise InputError(f"{where}: lengths must be at least 1 token")
    return Row(time_s, n_in, n_out, prompt, ids)


def _number(raw: dict[str, Any], key: str, where: str) -> float:
    value = raw.get(key)
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InputError(f"{where}: {key} must be a number, got {value!r}") from None
    if not math.isfinite(number) or number < 0:
        raise InputError(f"{where}: {key} must be a number ≥ 0, got {value!r}")
    return number


def _prompts(rows: list[Row], ds: TraceDataset, counter: TokenCounter, seed: int) -> list[Item]:
    blocks = _Blocks(counter, seed, ds.block_tokens)
    texts = [r.prompt or blocks.prompt(r, index) for index, r in enumerate(rows)]
    counts = counter.count_many(texts)
    return [Item(t, c, r.output_tokens) for t, c, r in zip(texts, counts, rows, strict=True)]


class _Blocks:
    """The text of each hash id's block (made once), and prompts joined from blocks."""

    def __init__(self, counter: TokenCounter, seed: int, size: int) -> None:
        self._counter, self._seed, self._size = counter, seed, size
        self._full: dict[int, str] = {}
        # the joint between two blocks: none where two texts add up exactly (chars4), a
        # space where words would merge (whitespace, most tokenizers)
        a, b = (self._text(1, f"joint-{n}") for n in (0, 1))
        self._sep = "" if counter.count(a + b) == 2 else " "

    def _text(self, tokens: int, key: str) -> str:
        return self._counter.make_text(tokens, random.Random(f"{self._seed}:{key}"))

    def prompt(self, row: Row, index: int) -> str:
        size, parts, left = self._size, [], row.input_tokens
        for block in row.hash_ids:
            if left <= 0:
                break
            if left >= size:
                if block not in self._full:
                    self._full[block] = self._text(size, f"block-{block}")
                parts.append(self._full[block])
            else:  # the prompt's last, partial block: the same seed, cut to its length
                parts.append(self._text(left, f"block-{block}"))
            left -= size
        if left > 0:  # more tokens than blocks: the rest is this row's own
            parts.append(self._text(left, f"row-{index}"))
        return self._sep.join(parts)
