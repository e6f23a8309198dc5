"""``processes: N``: every request a load child sent ends up as exactly one record.

The count is checked on both sides: the simulator's own ``/metrics`` counter of finished
requests (a fresh simulator per test, so it starts at zero) and the records written.
Stage names with a dot (``rate-12.5``, a sweep's ``rate-37.41``) once made the children's
part files collide and records went missing.
"""

from __future__ import annotations

import asyncio
import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from testbed.probes.load import multiprocess, run
from testbed.results.files import read_records


def served(url: str) -> int:
    """Requests the simulator finished, from its own Prometheus counters."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        text = response.read().decode()
    counts = re.findall(r"^vllm:request_success_total\{[^}]*\} (\d+)", text, re.MULTILINE)
    return sum(int(n) for n in counts)


def test_fractional_rate_with_two_processes_loses_no_record(
    simulator: Any, context: Any, tmp_path: Path
) -> None:
    config = {
        "profile": "rate",
        "rate": 12.5,
        "arrival": "constant",
        "requests": 25,
        "duration_s": None,
        "processes": 2,
        "dataset": {"output_tokens": 8},
    }
    with simulator() as url, context(url, tmp_path, **config) as ctx:
        outcome = asyncio.run(run(ctx))
        on_server = served(url)
    records = read_records(tmp_path / "records.jsonl")
    assert outcome.summary["stage"] == "rate-12.5"
    assert on_server == 25
    assert len(records) == 25
    assert sorted(r["n"] for r in records) == list(range(25))
    assert {r["proc"] for r in records} == {0, 1}
    assert not any(r["error"] for r in records)
    assert not list(tmp_path.glob(".load-*"))  # handed over, then removed


@pytest.mark.slow
def test_sweep_with_two_processes_loses_no_record(
    simulator: Any, context: Any, tmp_path: Path
) -> None:
    """Four stages; the two rate stages get rates computed from the first two, named with
    four significant digits (``rate-58.53`` at these latencies: below 100/s, a dot)."""
    config = {
        "profile": "sweep",
        "duration_s": 0.5,
        "processes": 2,
        "sweep": {"rates": 2, "max_concurrency": 4},
        "dataset": {"output_tokens": 8},
        "plots": False,
    }
    with (
        simulator("--ttft-ms", "20", "--itl-ms", "2") as url,
        context(url, tmp_path, **config) as ctx,
    ):
        outcome = asyncio.run(run(ctx))
        on_server = served(url)
    records = read_records(tmp_path / "records.jsonl")
    stages = outcome.summary["stages"]
    assert [s["stage"] for s in stages[:2]] == ["synchronous", "saturation"]
    assert all(s["stage"].startswith("rate-") for s in stages[2:])
    assert on_server == len(records) == sum(s["requests"]["total"] for s in stages)
    for stage in stages:
        mine = [r for r in records if r["stage"] == stage["stage"]]
        assert len(mine) == stage["requests"]["total"] > 0
        # one synchronous worker lives in one child; the other stages are split
        assert {r["proc"] for r in mine} == ({0} if stage["stage"] == "synchronous" else {0, 1})
    assert not list(tmp_path.glob(".load-*"))


def test_records_reach_the_sink_when_a_child_fails(tmp_path: Path) -> None:
    """A child that dies (here: a spec it cannot use) fails the stage; what the children
    had written is handed over before the part files are removed."""
    part = tmp_path / ".load-rate-1.5-0.jsonl"
    part.write_text('{"n": 0, "sent_ns": 1}\n{"n": 1, "se', encoding="utf-8")  # torn last line
    got: list[dict[str, Any]] = []
    stage = {"name": "rate-1.5"}
    with pytest.raises(multiprocess.InfrastructureError, match="load process"):
        asyncio.run(
            multiprocess.run_stage(
                {},
                stage,
                processes=1,
                seed=0,
                workdir=tmp_path,
                api_key=None,
                sink=got.append,
            )
        )
    assert got == [{"n": 0, "sent_ns": 1}]
    assert not list(tmp_path.glob(".load-*"))
