"""The llm-d Benchmark Report (schema v0.2.1, PyPI ``llmd-benchmark-report``): written beside
every load treatment, one per stage, and read back as a side of ``testbed compare``.

Filled only from what testbed knows — absent, never guessed:

- ``run``: ``uid`` = the run's request-id prefix and the stage, ``eid`` = the prefix (one per
  load run); ``time`` = the stage's steady-state window in wall time (from the run's clock
  anchor), the window the metrics describe;
- ``scenario.load``: the tool (testbed and its version), load processes, the token source
  (``random`` for synthetic prompts, ``sampled`` for a dataset file), the stage's index,
  concurrency (closed loop) or rate (open loop), the input length measured over the window
  (distribution ``other``: mean, std, min, max) and, only when the output length is enforced
  (``ignore_eos``), the output length; the load section as the native config. No ``stack``:
  testbed describes its servers in its own summary, not as llm-d components;
- ``results.request_performance.aggregate``: requests (total; ``failures`` the server's
  errors, ``incomplete`` the client's: timeouts, connections), input and output lengths
  (tokens, measured), TTFT and end-to-end latency (ms), ITL and TPOT (ms/token) with mean,
  std, p50/p90/p95/p99/p99.9, request and output-token rates (means over the window).

Read back (:func:`summary_of`, :func:`metrics_of`), a report gives testbed's metric names
(``ttft_ms.p99``, ``throughput.requests_per_s`` …) in testbed's units, each field read as
the tool that wrote it defines it (guidellm's ITL is testbed's TPOT). A report carries no
records: a comparison has no confidence interval for its metrics (they are judged
*unverified*: shown, never failing); :func:`caveats` says what else a reader must know (a
different client's clock, a different window).
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from testbed import __version__
from testbed.results import metrics
from testbed.results.files import write_json
from testbed.results.summaries import summary_metrics

VERSION = "0.2.1"
PREFIX = "benchmark_report"
#: testbed's latency metrics and the report's fields, with the report's units.
LATENCIES = {
    "ttft_ms": ("time_to_first_token", "ms"),
    "itl_ms": ("inter_token_latency", "ms/token"),
    "tpot_ms": ("time_per_output_token", "ms/token"),
    "e2e_ms": ("request_latency", "ms"),
}
_PERCENTILES = {"p50": "p50", "p90": "p90", "p95": "p95", "p99": "p99", "p999": "p99p9"}


def _statistics(values: Sequence[float], units: str) -> dict[str, Any] | None:
    if not values:
        return None
    data = np.asarray(values, dtype=float)
    out: dict[str, Any] = {"units": units, "mean": float(data.mean()), "stddev": float(data.std())}
    out |= {"min": float(data.min()), "max": float(data.max())}
    for ours, theirs in _PERCENTILES.items():
        out[theirs] = float(np.percentile(data, metrics.PERCENTILES[ours]))
    return out


def _from_summary(stats: Mapping[str, Any], units: str) -> dict[str, Any] | None:
    """A testbed distribution (mean, std, p50 …) as report statistics."""
    if not isinstance(stats.get("mean"), int | float):
        return None
    out: dict[str, Any] = {"units": units, "mean": stats["mean"]}
    if isinstance(stats.get("std"), int | float):
        out["stddev"] = stats["std"]
    for ours, theirs in _PERCENTILES.items():
        if isinstance(stats.get(ours), int | float):
            out[theirs] = stats[ours]
    return out


def _wall(t_ns: int, clock: Mapping[str, int]) -> str:
    wall_ns = clock["wall_ns"] + t_ns - clock["monotonic_ns"]
    return _dt.datetime.fromtimestamp(wall_ns / 1e9, tz=_dt.UTC).isoformat()


def _length(values: Sequence[float]) -> dict[str, Any]:
    data = np.asarray(values, dtype=float)
    return {
        "distribution": "other",
        "value": float(data.mean()),
        "std_dev": float(data.std()),
        "min": int(data.min()),
        "max": max(1, int(data.max())),
    }


def build(
    stage: Mapping[str, Any],
    index: int,
    records: Sequence[Mapping[str, Any]],
    config: Mapping[str, Any],
    setup: Mapping[str, Any],
) -> dict[str, Any]:
    """The report of one stage (its summary, its records, the load section, the run's
    setup: request-id prefix and clock anchor)."""
    window = stage["window"]
    win = metrics.Window(int(window["start_ns"]), int(window["end_ns"]))
    inside = metrics.in_window([r for r in records if r.get("stage") == stage["stage"]], win)
    prefix = str(setup["request_ids"])
    run: dict[str, Any] = {"uid": f"{prefix}.{stage['stage']}", "eid": prefix}
    clock = setup.get("clock")
    if isinstance(clock, Mapping):
        seconds = win.seconds
        run["time"] = {
            "start": _wall(win.start_ns, clock),
            "end": _wall(win.end_ns, clock),
            "duration": f"PT{seconds:.6f}S",
        }
    return {
        "version": VERSION,
        "run": run,
        "scenario": {"load": _load(stage, index, inside, config)},
        "results": {"request_performance": {"aggregate": _aggregate(stage, inside)}},
    }


def _load(
    stage: Mapping[str, Any],
    index: int,
    inside: Sequence[Mapping[str, Any]],
    config: Mapping[str, Any],
) -> dict[str, Any]:
    level = stage.get("load") or {}
    dataset = config.get("dataset") or {}
    standardized: dict[str, Any] = {
        "tool": "testbed",
        "tool_version": __version__,
        "parallelism": int(config.get("processes") or 1),
        "source": "sampled" if dataset.get("kind") == "file" else "random",
        "stage": index,
        "input_seq_len": _length([r["input_tokens"] for r in inside] or [0]),
    }
    if config.get("ignore_eos") and inside:
        standardized["output_seq_len"] = _length([r["output_tokens"] for r in inside])
    if isinstance(level.get("rate"), int | float) and level["rate"] > 0:
        standardized["rate_qps"] = level["rate"]
    elif isinstance(level.get("concurrency"), int) and level["concurrency"] >= 1:
        standardized["concurrency"] = level["concurrency"]
    return {
        "metadata": {"treatment": str(stage["stage"])},
        "standardized": standardized,
        "native": {"config": dict(config)},
    }


def _aggregate(stage: Mapping[str, Any], inside: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    requests = stage.get("requests") or {}
    total, errors = int(requests.get("total") or 0), int(requests.get("errors") or 0)
    by_server = int(requests.get("server_errors") or 0)
    counted: dict[str, Any] = {"total": total, "failures": by_server}
    counted["incomplete"] = max(0, errors - by_server)
    for name, key in (("input_length", "input_tokens"), ("output_length", "output_tokens")):
        stats = _statistics([r[key] for r in inside if r.get(key) is not None], "count")
        if stats is not None:
            counted[name] = stats
    latency = {}
    for ours, (theirs, units) in LATENCIES.items():
        stats = _from_summary(stage.get(ours) or {}, units)
        if stats is not None:
            latency[theirs] = stats
    throughput = stage.get("throughput") or {}
    rates = {}
    for ours, theirs, units in (
        ("requests_per_s", "request_rate", "queries/s"),
        ("output_tokens_per_s", "output_token_rate", "tokens/s"),
    ):
        if isinstance(throughput.get(ours), int | float):
            rates[theirs] = {"units": units, "mean": throughput[ours]}
    return {"requests": counted, "latency": latency, "throughput": rates}


def stages_of(summary: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    stages = summary.get("stages")
    return list(stages) if isinstance(stages, list) and stages else [summary]


def write_reports(
    folder: Path,
    summary: Mapping[str, Any],
    records: Sequence[Mapping[str, Any]],
    config: Mapping[str, Any],
) -> list[str]:
    """One report per stage of a load summary, ``benchmark_report.<stage>.json`` in
    ``folder``; the names written (none for a stage without a window)."""
    names = []
    for index, stage in enumerate(stages_of(summary)):
        if not isinstance(stage.get("window"), Mapping):
            continue
        report = build(stage, index, records, config, summary["setup"])
        name = f"{PREFIX}.{stage['stage']}.json"
        write_json(folder / name, report)
        names.append(name)
    return names


# -- reading one back -------------------------------------------------------------------------

_TO_MS = {"ms": 1.0, "s": 1e3, "ms/token": 1.0, "s/token": 1e3}
#: Where a tool's report field means another testbed metric than the field's name says.
#: guidellm's inter-token latency is, per request, (last token - first token) / (tokens - 1)
#: (its request_stats.py): testbed's TPOT, not testbed's ITL (every gap between chunks);
#: its time per output token includes the first token, which testbed has no metric for.
_RENAMED: dict[str, dict[str, str | None]] = {
    "guidellm": {"inter_token_latency": "tpot_ms", "time_per_output_token": None},
}
#: A report with no records: every comparison of its metrics is unverified.
NO_RECORDS = (
    "a Benchmark Report has no records: its metrics get no confidence interval and are"
    " judged unverified (shown, never failing)"
)
#: The client overhead measured: a simulator set to TTFT 20 ms (docs/results.md).
CLIENT_CLOCK = (
    "{tool}'s latencies were timed by its own client (its clock, HTTP stack and overhead are"
    " in its TTFT and E2E): against a server set to TTFT 20 ms testbed read p50 20.11 ms"
    " where vLLM's benchmark read 21.35 ms, so a change of a millisecond or a few percent"
    " may be the clients', not the server's"
)
WINDOW = (
    "{tool}'s rates are over its whole benchmark (first request to last); testbed's over"
    " its steady-state window, which leaves out the ramp-up and the drain"
)
GUIDELLM_ITL = (
    "guidellm's ITL is per request ((last - first token) / (tokens - 1)): compared as"
    " testbed's TPOT; its TPOT counts the first token too and is not compared"
)


def tool_of(report: Mapping[str, Any]) -> str:
    standardized = ((report.get("scenario") or {}).get("load") or {}).get("standardized") or {}
    return str(standardized.get("tool") or "")


def is_report(document: Any) -> bool:
    return isinstance(document, Mapping) and str(document.get("version", "")).startswith("0.2")


def summary_of(report: Mapping[str, Any]) -> dict[str, Any]:
    """A v0.2.x report's figures in the shape of testbed's load summary (``ttft_ms``
    {mean, p50 …} in ms, ``throughput``, ``requests``), each field named as the tool that
    wrote it means it (:data:`_RENAMED`)."""
    results = report.get("results") or {}
    aggregate = (results.get("request_performance") or {}).get("aggregate") or {}
    fields: dict[str, str | None] = {theirs: ours for ours, (theirs, _) in LATENCIES.items()}
    fields |= _RENAMED.get(tool_of(report), {})
    out: dict[str, Any] = {}
    for theirs, ours in fields.items():
        stats = (aggregate.get("latency") or {}).get(theirs) or {}
        scale = _TO_MS.get(str(stats.get("units")))
        if ours is None or scale is None:
            continue
        figures = {
            name: float(stats[field]) * scale
            for name, field in (("mean", "mean"), *_PERCENTILES.items())
            if isinstance(stats.get(field), int | float) and math.isfinite(stats[field])
        }
        if figures:
            out[ours] = figures
    rates = aggregate.get("throughput") or {}
    throughput = {
        ours: float(value)
        for ours, theirs in (
            ("requests_per_s", "request_rate"),
            ("output_tokens_per_s", "output_token_rate"),
        )
        if isinstance(value := (rates.get(theirs) or {}).get("mean"), int | float)
    }
    if throughput:
        out["throughput"] = throughput
    requests = aggregate.get("requests") or {}
    if isinstance(requests.get("total"), int):
        errors = int(requests.get("failures") or 0) + int(requests.get("incomplete") or 0)
        out["requests"] = {"total": requests["total"], "errors": errors}
    return out


def metrics_of(report: Mapping[str, Any]) -> dict[str, float]:
    """testbed's metrics (names and units) in a v0.2.x report."""
    return summary_metrics(summary_of(report))


def caveats(report: Mapping[str, Any]) -> list[str]:
    """What a comparison with ``report`` as a side must say about its numbers."""
    tool = tool_of(report)
    out = [NO_RECORDS]
    if tool and tool != "testbed":
        out += [CLIENT_CLOCK.format(tool=tool), WINDOW.format(tool=tool)]
    if tool == "guidellm":
        out.append(GUIDELLM_ITL)
    return out
