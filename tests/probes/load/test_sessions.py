"""Multi-turn sessions: every turn of a ShareGPT conversation, generated sessions, each turn
carrying the history (the server counts it), what concurrency counts, per-turn figures and
the prefix cache's effect on later turns."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from testbed.config.workload import SessionDataset
from testbed.probes.load import sessions
from testbed.probes.load.tokens import RuleCounter
from testbed.results.files import read_records
from testbed.results.verdict import Status
from tests.probes.load.conftest import run_once

SESSIONS = {"kind": "sessions", "sessions": 6, "turns": 3, "input_tokens": 20, "output_tokens": 5}


def _records(out: Path) -> list[dict[str, Any]]:
    return [dict(r) for r in read_records(out / "records.jsonl")]


def test_every_human_turn_of_a_sharegpt_conversation_is_a_turn(tmp_path: Path) -> None:
    rows = [
        {
            "conversations": [
                {"from": "system", "value": "be brief"},
                {"from": "human", "value": "one two three"},
                {"from": "gpt", "value": "a b"},
                {"from": "human", "value": "four five"},
                {"from": "gpt", "value": "c d e f"},
                {"from": "human", "value": "six"},
            ]
        },
        {"messages": [{"role": "assistant", "content": "no human first"}]},
    ]
    (tmp_path / "chats.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    ds = SessionDataset.model_validate({"kind": "sessions", "path": "chats.jsonl"})
    (conversation,) = sessions.build(ds, RuleCounter(), 1, tmp_path)
    turns = [(t.text, t.tokens, t.output_tokens) for t in conversation.turns]
    # each human turn asks for its reply's length; the last has none: the default 64
    assert turns == [("one two three", 3, 2), ("four five", 2, 4), ("six", 1, 64)]


def test_generated_sessions_are_seeded(tmp_path: Path) -> None:
    ds = SessionDataset.model_validate({**SESSIONS, "turns": [1, 2, 3]})
    a = sessions.build(ds, RuleCounter(), 3, tmp_path)
    assert a == sessions.build(ds, RuleCounter(), 3, tmp_path)
    assert a != sessions.build(ds, RuleCounter(), 4, tmp_path)
    assert {len(c.turns) for c in a} <= {1, 2, 3}
    assert all(t.tokens == 20 and t.output_tokens == 5 for c in a for t in c.turns)


def test_each_turn_carries_the_history_the_server_counts(sim_url: str, tmp_path: Path) -> None:
    """The server's own count of each turn's prompt is the history's: every previous
    message and answer (chat), or the grown prompt (completions)."""
    for api in ("chat", "completions"):
        out = tmp_path / api
        out.mkdir()
        outcome = run_once(sim_url, out, api=api, concurrency=2, requests=18, dataset=SESSIONS)
        assert outcome.verdict.status == Status.PASS, outcome.verdict.reason
        records = _records(out)
        assert len(records) == 18
        for r in records:
            assert r["input_tokens"] == 20 + r["turn"] * (20 + 5)
            assert r["usage_input_tokens"] == r["input_tokens"]
        by_turn = outcome.summary["by_turn"]
        assert [t["turn"] for t in by_turn] == [0, 1, 2]
        assert [t["input_tokens_mean"] for t in by_turn] == [20, 45, 70]
        assert outcome.summary["sessions"]["count"] == 6
        assert outcome.summary["sessions"]["turns_max"] == 3
        assert "ttft_by_turn.png" in outcome.summary["plots"]
        assert (out / "ttft_by_turn.png").stat().st_size > 0


def _in_flight_sessions(records: list[dict[str, Any]]) -> int:
    """The most sessions between their first send and their last answer at once."""
    spans: dict[int, list[int]] = {}
    for r in records:
        span = spans.setdefault(r["session"], [r["sent_ns"], r["done_ns"]])
        span[0], span[1] = min(span[0], r["sent_ns"]), max(span[1], r["done_ns"])
    events = sorted([(a, 1) for a, _ in spans.values()] + [(b, -1) for _, b in spans.values()])
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def test_concurrency_counts_sessions_or_turns(sim_url: str, tmp_path: Path) -> None:
    """unit sessions: two workers hold two sessions at a time, thinking included; unit
    turns: two slots never idle while sessions think, so more sessions are open at once."""
    thinking = {**SESSIONS, "sessions": 20, "think_time_s": 0.05}
    out = tmp_path / "sessions"
    out.mkdir()
    run_once(sim_url, out, concurrency=2, requests=24, dataset=thinking)
    assert _in_flight_sessions(_records(out)) == 2
    out = tmp_path / "turns"
    out.mkdir()
    run_once(sim_url, out, concurrency=2, requests=24, dataset={**thinking, "unit": "turns"})
    records = _records(out)
    assert _in_flight_sessions(records) > 2
    assert {r["turn"] for r in records} == {0, 1, 2}  # thought-out turns do come back


def test_sessions_run_in_several_load_processes(sim_url: str, tmp_path: Path) -> None:
    outcome = run_once(sim_url, tmp_path, concurrency=2, requests=18, processes=2, dataset=SESSIONS)
    assert outcome.verdict.status == Status.PASS, outcome.verdict.reason
    records = _records(tmp_path)
    assert {r["proc"] for r in records} == {0, 1}
    assert all(r["usage_input_tokens"] == 20 + r["turn"] * 25 for r in records)
    assert len({r["session"] for r in records}) == 6


def test_a_session_rate_starts_sessions(sim_url: str, tmp_path: Path) -> None:
    """rate counts sessions: 20 sessions/s of 3 turns send about 60 turns/s."""
    rate = {"profile": "rate", "rate": 20, "arrival": "constant"}
    outcome = run_once(sim_url, tmp_path, **rate, requests=30, dataset=SESSIONS)
    records = _records(tmp_path)
    assert len(records) == 30
    firsts = sorted(r["scheduled_ns"] for r in records if r["turn"] == 0)
    assert firsts[1] - firsts[0] == 50_000_000  # a session every 50 ms
    assert outcome.summary["sessions"]["count"] == len(firsts)


def test_the_prefix_cache_makes_later_turns_fast(simulator: Any, tmp_path: Path) -> None:
    """With prefix caching a turn prefills only its new message — the history, answers
    included, is cached: TTFT stays flat as the history grows; without, it grows with the
    history (0.1 ms per prompt token)."""
    ds = {**SESSIONS, "sessions": 4, "turns": 4, "input_tokens": 200, "output_tokens": 300}
    ttft: dict[bool, list[float]] = {}
    for caching in (True, False):
        flags = ["--ttft-ms", "5", "--ttft-per-prompt-token-ms", "0.1"]
        flags += ["--kv-cache-tokens", "100000", "--set", f"prefix_caching={str(caching).lower()}"]
        out = tmp_path / str(caching)
        out.mkdir()
        with simulator(*flags) as url:
            outcome = run_once(url, out, api="chat", concurrency=1, requests=16, dataset=ds)
        ttft[caching] = [t["ttft_ms"]["p50"] for t in outcome.summary["by_turn"]]
    # turn 3 carries 3 * 500 tokens of history: 150 ms more to prefill without the cache;
    # with it, an uncached last answer alone would be 30 ms more
    assert ttft[False][3] - ttft[False][0] > 100
    assert ttft[True][3] - ttft[True][0] < 12


def test_a_model_mix_deals_sessions_not_turns(simulator: Any, tmp_path: Path) -> None:
    """A session's history stays with one model: the mix is dealt per conversation."""
    with simulator("--adapter", "lora-a") as url:
        outcome = run_once(
            url,
            tmp_path,
            concurrency=2,
            requests=18,
            models=["sim-model", "lora-a"],
            extra_body={"temperature": 0.5},
            dataset=SESSIONS,
        )
    assert outcome.verdict.status == Status.PASS, outcome.verdict.reason
    models: dict[int, set[str]] = {}
    for r in _records(tmp_path):
        models.setdefault(r["session"], set()).add(r["model"])
    assert all(len(names) == 1 for names in models.values())
    assert set().union(*models.values()) == {"sim-model", "lora-a"}
