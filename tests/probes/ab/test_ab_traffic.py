"""The A/B prompt set, the sending order and the pacing (no server involved)."""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from pathlib import Path

import pytest

from testbed.clients.http import ConnectionPool
from testbed.clients.response import Response
from testbed.core.clock import monotonic_ns
from testbed.core.errors import InputError
from testbed.probes.ab import prompts, traffic
from testbed.probes.ab.traffic import AbRequest


def test_synthetic_prompts_are_distinct_and_seeded() -> None:
    a = prompts.synthetic(300, seed=4)
    assert len({p.text for p in a}) == 300
    assert a == prompts.synthetic(300, seed=4)
    assert a != prompts.synthetic(300, seed=5)
    assert a[0].as_messages() == [{"role": "user", "content": a[0].as_text()}]


def test_prompt_file(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(
        "# a comment\n"
        + json.dumps({"id": "a", "prompt": "hello"})
        + "\n\n"
        + json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5})
        + "\n"
    )
    got = prompts.build("p.jsonl", 10, 0, tmp_path)
    assert [p.id for p in got] == ["a", "line-4"]
    assert got[0].as_messages() == [{"role": "user", "content": "hello"}]
    assert got[1].as_text() == "hi"
    assert got[1].max_tokens == 5


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"prompt": 3}', "must be a string"),
        ('{"id": "x"}', "or both"),
        ('{"prompt": "a", "messages": []}', "non-empty list"),
        ('{"text": "a"}', "unknown key"),
        ("[1]", "expected a JSON object"),
        ("{nope", "not valid JSON"),
        ('{"prompt": "a", "max_tokens": 0}', "positive integer"),
    ],
)
def test_prompt_file_errors_name_the_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": "fine"}\n' + line + "\n")
    with pytest.raises(InputError, match=rf"bad.jsonl:2: .*{message}"):
        prompts.load(path)


def test_missing_prompt_file_says_where_paths_start(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="relative to the campaign file"):
        prompts.build("nowhere.jsonl", 1, 0, tmp_path)


def test_paired_order_keeps_pairs_adjacent_and_shuffled() -> None:
    prompt_set = prompts.synthetic(7, 0)
    order = traffic.paired_order(prompt_set, 40, random.Random(3))
    assert len(order) == 80
    assert [j.seq for j in order] == list(range(80))
    for first, second in zip(order[::2], order[1::2], strict=True):
        assert first.pair == second.pair
        assert {first.side, second.side} == {"stable", "canary"}
        assert first.prompt == second.prompt == prompt_set[first.pair % 7]
    pair_order = [j.pair for j in order[::2]]
    assert sorted(pair_order) == list(range(40))
    assert pair_order != list(range(40))
    firsts = Counter(j.side for j in order[::2])
    assert 10 <= firsts["canary"] <= 30  # the coin, not always the same side first
    assert order == traffic.paired_order(prompt_set, 40, random.Random(3))


def test_split_order_sends_the_exact_share() -> None:
    order = traffic.split_order(prompts.synthetic(5, 0), 101, 0.2, random.Random(1))
    sides = Counter(j.side for j in order)
    assert sides == {"canary": 20, "stable": 81}
    assert {j.prompt.id for j in order} == {f"syn-{i:04d}" for i in range(5)}
    assert [j.side for j in order[:20]] != ["stable"] * 20 or sides["canary"] == 0
    tiny = traffic.split_order(prompts.synthetic(1, 0), 2, 0.01, random.Random(1))
    assert Counter(j.side for j in tiny) == {"canary": 1, "stable": 1}


async def _measure(order: list[AbRequest], concurrency: int, per_side: bool) -> dict[str, int]:
    in_flight: Counter[str] = Counter()
    peak: Counter[str] = Counter()

    async def send(request: AbRequest) -> None:
        key = request.side if per_side else "all"
        in_flight[key] += 1
        peak[key] = max(peak[key], in_flight[key])
        for _ in range(3):  # stay in flight for a few loop turns
            await asyncio.sleep(0)
        in_flight[key] -= 1

    await traffic.drive(order, send, concurrency=concurrency, rate=None, per_side=per_side)
    return dict(peak)


def test_closed_loop_limits_each_side_when_paired() -> None:
    order = traffic.paired_order(prompts.synthetic(10, 0), 30, random.Random(0))
    assert asyncio.run(_measure(order, 3, per_side=True)) == {"stable": 3, "canary": 3}


def test_closed_loop_limits_the_one_stream_when_split() -> None:
    order = traffic.split_order(prompts.synthetic(10, 0), 30, 0.5, random.Random(0))
    assert asyncio.run(_measure(order, 4, per_side=False)) == {"all": 4}


def test_open_loop_releases_a_pair_per_tick() -> None:
    order = traffic.paired_order(prompts.synthetic(4, 0), 6, random.Random(0))
    started: dict[int, list[int]] = {}

    async def send(request: AbRequest) -> None:
        started.setdefault(request.pair, []).append(monotonic_ns())

    async def main() -> int:
        t0 = monotonic_ns()
        await traffic.drive(order, send, concurrency=1, rate=100.0, per_side=True)
        return t0

    t0 = asyncio.run(main())
    ticks = [j.pair for j in order[::2]]
    for k, pair in enumerate(ticks):
        times = started[pair]
        assert len(times) == 2
        assert min(times) - t0 >= k * 10_000_000 - 1_000_000  # not before its tick (10 ms)
        assert max(times) - min(times) < 5_000_000  # both sides of a pair together


def test_record_of_an_empty_answer_and_of_an_http_error() -> None:
    async def records() -> tuple[dict[str, object], dict[str, object]]:
        target = traffic.Target(
            "canary", "c", ConnectionPool("http://127.0.0.1:9"), "m", "completions", 8, 0.0, 5.0
        )
        request = AbRequest(0, 0, "canary", prompts.synthetic(1, 0)[0])
        empty = Response(status=200, t_sent_ns=10, t_done_ns=20, finish_reason="stop")
        failed = Response(status=500, t_sent_ns=10, t_done_ns=20, error="HTTP 500: boom")
        return (
            traffic.record_of(request, target, empty, None, 5),
            traffic.record_of(request, target, failed, None, 5),
        )

    empty, failed = asyncio.run(records())
    assert empty["error"] is None
    assert empty["text"] == ""
    assert empty["chunks_ns"] == []
    assert empty["sent_ns"] == 10
    assert empty["done_ns"] == 20
    assert failed["error"] == "HTTP 500: boom"
    assert failed["status"] == 500


def test_a_request_never_sent_has_no_sent_time_and_the_servers_count_by_its_name() -> None:
    """An A/B record's ``sent_ns`` means what a load record's does (null when the request was
    never written; the attempt's start is ``started_ns``), and the server's token count is
    ``usage_output_tokens``: ``output_tokens`` is the client's count in a load record."""

    async def records() -> tuple[dict[str, object], dict[str, object]]:
        target = traffic.Target(
            "canary", "c", ConnectionPool("http://127.0.0.1:9"), "m", "completions", 8, 0.0, 5.0
        )
        request = AbRequest(0, 0, "canary", prompts.synthetic(1, 0)[0])
        answered = Response(status=200, t_sent_ns=10, t_done_ns=20, usage={"completion_tokens": 3})
        return (
            dict(traffic.record_of(request, target, None, "connection refused", 5, "connect")),
            dict(traffic.record_of(request, target, answered, None, 5)),
        )

    refused, answered = asyncio.run(records())
    assert (refused["started_ns"], refused["sent_ns"], refused["error_kind"]) == (
        5,
        None,
        "connect",
    )
    assert (answered["started_ns"], answered["sent_ns"]) == (5, 10)
    assert answered["usage_output_tokens"] == 3
    assert "output_tokens" not in answered
