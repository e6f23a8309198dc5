"""``testbed load``'s session and trace flags: the dataset they make, a trace replayed at its
offsets by default, and flags that need each other refused (exit 2)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed.cli import main
from testbed.results.files import read_records
from testbed.servers.sim.child import sim_process


@pytest.fixture(scope="module")
def sim() -> Iterator[str]:
    with sim_process("--ttft-ms", "2", "--itl-ms", "1") as url:
        yield url


def test_sessions_from_flags(sim: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    flags = ["--sessions", "3", "--turns", "2", "--input-tokens", "5", "--output-tokens", "2"]
    code = main(["load", sim, *flags, "--requests", "6", "--no-plots", "--out", str(out)])
    assert code == 0
    records = list(read_records(out / "records.jsonl"))
    assert sorted((r["session"], r["turn"]) for r in records) == [
        (s, t) for s in range(3) for t in range(2)
    ]
    summary = json.loads((out / "summary.json").read_text())
    assert [t["input_tokens_mean"] for t in summary["by_turn"]] == [5, 12]


def test_a_trace_from_flags_is_replayed_at_its_offsets(sim: str, tmp_path: Path) -> None:
    rows = [{"timestamp": 100 * k, "input_length": 8, "output_length": 2} for k in range(4)]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    code = main(
        ["load", sim, "--trace", str(tmp_path / "t.jsonl"), "--trace-speed", "4", "--no-plots",
         "--out", str(out)]
    )  # fmt: skip
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["profile"], summary["stage"]) == ("trace", "trace-x4")
    sent = sorted(r["scheduled_ns"] for r in read_records(out / "records.jsonl"))
    assert [t - sent[0] for t in sent] == [0, 25_000_000, 50_000_000, 75_000_000]


@pytest.mark.parametrize(
    "flags",
    [["--turns", "3"], ["--dataset-format", "sessions"], ["--trace", "t.jsonl", "--sessions", "2"]],
)
def test_flags_that_need_each_other(sim: str, tmp_path: Path, flags: list[str]) -> None:
    assert main(["load", sim, *flags, "--out", str(tmp_path / "out")]) == 2


def test_the_html_report_shows_ttft_by_turn(sim: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    flags = ["--sessions", "2", "--turns", "3", "--input-tokens", "5", "--output-tokens", "2"]
    assert main(["load", sim, *flags, "--requests", "6", "--no-plots", "--out", str(out)]) == 0
    assert main(["report", str(out)]) == 0
    page = (out / "report.html").read_text()
    assert "TTFT by turn" in page
    assert "<td>2</td><td>2/2</td><td>19</td>" in page  # turn 2: history of 5 + 2 + 5 + 2 + 5
    assert "2 sessions, 3.0 turns each on average, 0 ended by an error" in page
