"""Trace replay: the Mooncake format and plain JSONL/CSV, the window, speed and looping,
prompts whose equal hash_ids are equal tokens, and sends at the trace's offsets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from testbed.config.load import LoadProbe
from testbed.config.workload import TraceDataset
from testbed.core.errors import InputError
from testbed.probes.load import trace
from testbed.probes.load.tokens import RuleCounter
from testbed.results.files import read_records
from testbed.results.verdict import Status
from tests.probes.load.conftest import run_once

MOONCAKE = [
    {"timestamp": 0, "input_length": 40, "output_length": 3, "hash_ids": [0, 1, 2]},
    {"timestamp": 0, "input_length": 30, "output_length": 2, "hash_ids": [0, 1, 3]},
    {"timestamp": 250, "input_length": 20, "output_length": 4, "hash_ids": [0, 1]},
    {"timestamp": 1000, "input_length": 48, "output_length": 1, "hash_ids": [7]},
]


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")


def _ds(**fields: Any) -> TraceDataset:
    return TraceDataset.model_validate({"kind": "trace", "path": "t.jsonl", **fields})


def test_mooncake_rows_become_offsets_and_prompts_of_their_lengths(tmp_path: Path) -> None:
    _write(tmp_path / "t.jsonl", MOONCAKE)
    loaded = trace.load(_ds(block_tokens=16), RuleCounter(), 1, tmp_path)
    assert loaded.offsets_ns == [0, 0, 250_000_000, 1_000_000_000]
    assert [i.input_tokens for i in loaded.items] == [40, 30, 20, 48]
    assert [i.output_tokens for i in loaded.items] == [3, 2, 4, 1]
    words = [i.prompt.split() for i in loaded.items]
    # hash ids 0 and 1 are the same tokens in every prompt: the second's 30 tokens are
    # block 0 and the start of block 1 (its last block, cut), the third's 20 too
    assert words[1] == words[0][:30]
    assert words[2] == words[0][:20]
    # a prompt longer than its ids has text of its own after them
    assert words[3][:16] != words[0][:16]
    assert trace.load(_ds(block_tokens=16), RuleCounter(), 1, tmp_path) == loaded


def test_equal_blocks_are_equal_characters_under_chars4(tmp_path: Path) -> None:
    """chars4 counts groups of 4 characters: blocks join without a space, so a shared
    block starts on the same group boundary in every prompt."""
    _write(tmp_path / "t.jsonl", MOONCAKE)
    items = trace.load(_ds(block_tokens=16), RuleCounter("chars4"), 1, tmp_path).items
    assert [i.input_tokens for i in items] == [40, 30, 20, 48]
    assert items[0].prompt[: 4 * 16] == items[1].prompt[: 4 * 16]  # block 0
    # block 1, cut to 14 tokens in the second prompt: the same but its last group (a stop)
    assert items[0].prompt[: 4 * 29] == items[1].prompt[: 4 * 29]


def test_speed_window_and_loop(tmp_path: Path) -> None:
    _write(tmp_path / "t.jsonl", MOONCAKE)
    fast = trace.load(_ds(speed=2), RuleCounter(), 1, tmp_path)
    assert fast.offsets_ns == [0, 0, 125_000_000, 500_000_000]
    window = trace.load(_ds(start_s=0.1, end_s=2), RuleCounter(), 1, tmp_path)
    assert window.offsets_ns == [150_000_000, 900_000_000]
    assert window.period_ns == 1_900_000_000
    looped = trace.schedule(window, loop=True, duration_s=None, requests=5)
    assert looped == [150_000_000, 900_000_000, 2_050_000_000, 2_800_000_000, 3_950_000_000]
    assert trace.schedule(window, loop=True, duration_s=2.5, requests=None) == looped[:3]
    assert trace.schedule(window, loop=False, duration_s=None, requests=None) == looped[:2]


def test_plain_csv_and_jsonl_traces(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text(
        "time_s,input_tokens,output_tokens,prompt\n0.5,,3,hello there\n0,4,2,\n"
    )
    ds = TraceDataset.model_validate({"kind": "trace", "path": "t.csv", "format": "csv"})
    loaded = trace.load(ds, RuleCounter(), 1, tmp_path)
    assert loaded.offsets_ns == [0, 500_000_000]  # sorted by time
    assert loaded.items[1].prompt == "hello there"
    assert loaded.items[0].input_tokens == 4
    _write(tmp_path / "p.jsonl", [{"time_s": 0, "prompt": "a b c", "output_tokens": 2}])
    ds = TraceDataset.model_validate({"kind": "trace", "path": "p.jsonl", "format": "jsonl"})
    assert trace.load(ds, RuleCounter(), 1, tmp_path).items[0].input_tokens == 3


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"timestamp": -1, "input_length": 3, "output_length": 1}, "row 1: timestamp must be"),
        ({"timestamp": 0, "output_length": 1}, "row 1: needs input_length"),
        ({"timestamp": 0, "input_length": 3}, "row 1: needs output_length"),
        ({"timestamp": 0, "input_length": 3, "output_length": 1, "hash_ids": ["x"]}, "hash_ids"),
        ({"timestamp": "soon", "input_length": 3, "output_length": 1}, "timestamp must be a"),
    ],
)
def test_a_bad_row_is_named(tmp_path: Path, row: dict[str, Any], message: str) -> None:
    _write(tmp_path / "t.jsonl", [row])
    with pytest.raises(InputError, match=message):
        trace.load(_ds(), RuleCounter(), 1, tmp_path)


def test_an_empty_window_says_what_the_trace_spans(tmp_path: Path) -> None:
    _write(tmp_path / "t.jsonl", MOONCAKE)
    with pytest.raises(InputError, match=r"span 0 \.\. 1 s"):
        trace.load(_ds(start_s=5), RuleCounter(), 1, tmp_path)


def test_a_replay_sends_at_the_trace_offsets(sim_url: str, tmp_path: Path) -> None:
    rows = [
        {"timestamp": 40 * k, "input_length": 16, "output_length": 2, "hash_ids": [0]}
        for k in range(10)
    ]
    _write(tmp_path / "t.jsonl", rows)
    out = tmp_path / "out"
    out.mkdir()
    outcome = run_once(
        sim_url,
        out,
        base_dir=tmp_path,
        profile="trace",
        requests=15,
        dataset={"kind": "trace", "path": "t.jsonl", "loop": True, "speed": 2},
    )
    assert outcome.verdict.status == Status.PASS, outcome.verdict.reason
    assert outcome.summary["stage"] == "trace-x2"
    records = sorted(read_records(out / "records.jsonl"), key=lambda r: r["n"])
    t0 = records[0]["scheduled_ns"]
    # 20 ms apart at twice the speed; the loop goes on after 10 rows with one more gap
    assert [r["scheduled_ns"] - t0 for r in records] == [20_000_000 * k for k in range(15)]
    assert [r["item"] for r in records] == [k % 10 for k in range(15)]
    assert outcome.summary["harness"]["schedule_lag_ms"]["p99"] is not None
    assert outcome.summary["requests"]["total"] == 15


def test_a_trace_stage_is_bounded_by_its_own_length() -> None:
    config = LoadProbe.model_validate(
        {"profile": "trace", "duration_s": 0.5, "dataset": {"kind": "trace", "path": "t"}}
    )
    loaded = trace.Trace([], [0, 200_000_000, 400_000_000, 600_000_000], 800_000_000)
    stage = trace.stage(config, loaded)
    assert stage.arrivals is not None
    assert stage.arrivals.offsets == (0, 200_000_000, 400_000_000)
    assert (stage.duration_s, stage.max_requests) == (None, 3)
