"""``testbed load`` against a server whose word cannot be true: never a PASS (issue 32).

The command a user types, against the scripted server (tests/fixtures/scripted.py) answering
8 words to ``--output-tokens 8`` but counting them wrongly: 800 tokens used to be a PASS at
30,000 tok/s, −5 a PASS at a negative rate, ``"8"`` an internal error (exit 3). Each is now
the server's error of every request (FAIL, exit 1, the reason in words); throughput comes
from the tokens the client counted, the server's count kept beside. Against a server that
says it is the simulator, the client counts exactly (one token per word), so a count that is
possible but not this text's is the server's error too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed.cli import main
from tests.fixtures.scripted import (
    Answer,
    ScriptedServer,
    openai_body,
    openai_stream,
    scripted_server,
    usage,
)
from tests.verdicts import assert_passed

Counts = Callable[[dict[str, Any]], dict[str, Any]]


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with scripted_server() as scripted:
        yield scripted


@pytest.fixture(scope="module")
def simulated() -> Iterator[ScriptedServer]:
    """A server that says it is the simulator: the load probe counts one token per word."""
    with scripted_server(simulated=True) as scripted:
        yield scripted


def counted(counts: Counts, *, per_chunk: int = 1) -> Callable[[str, dict[str, Any]], Answer]:
    """A script: ``max_tokens`` words, ``per_chunk`` to a chunk, ``counts(request)`` as usage."""

    def script(path: str, request: dict[str, Any]) -> Answer:
        n = int(request["max_tokens"])
        events = openai_stream(path, n, counts(request), per_chunk=per_chunk)
        return Answer(events, openai_body(path, n, counts(request)))

    return script


def load(server: ScriptedServer, out: Path, *flags: str) -> tuple[int, dict[str, Any]]:
    args = ["load", server.url, "--requests", "6", "--concurrency", "2", "--output-tokens", "8"]
    code = main([*args, "--input-tokens", "16", "--no-plots", "--out", str(out), *flags])
    return code, json.loads((out / "summary.json").read_text())


def records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]


def prompt_words(request: dict[str, Any]) -> int:
    text = request.get("prompt") or request["messages"][0]["content"]
    return len(str(text).split())


@pytest.mark.parametrize(
    ("completion", "stream", "words"),
    [
        (800, True, "usage.completion_tokens 800 is over the request's max_tokens 8"),
        (800, False, "usage.completion_tokens 800 is over the request's max_tokens 8"),
        (-5, True, "usage.completion_tokens -5 is not a count of tokens"),
        ("8", True, 'usage.completion_tokens "8" is not a count of tokens'),
        ("8", False, 'usage.completion_tokens "8" is not a count of tokens'),
        (3, True, "usage.completion_tokens 3 is fewer than the 8 text chunks that arrived"),
    ],
)
def test_impossible_counts_fail_every_request_as_the_servers_error(
    server: ScriptedServer, tmp_path: Path, completion: Any, stream: bool, words: str
) -> None:
    server.script = counted(lambda _r: usage(16, completion))
    code, summary = load(server, tmp_path, *([] if stream else ["--no-stream"]))
    assert (summary["verdict"]["status"], code) == ("FAIL", 1), summary["verdict"]
    assert summary["requests"]["server_errors"] == 6
    assert words in summary["verdict"]["reason"]
    assert summary["throughput"]["output_tokens_per_s"] == 0.0  # no ok request: no tokens
    for record in records(tmp_path):
        assert record["error"].startswith(words), record["error"]
        assert record["error_by"] == "server"
        assert record["output_tokens"] == record["client_output_tokens"] == 8
        expected = completion if type(completion) is int else None  # a count, or nothing
        assert record["usage_output_tokens"] == expected


@pytest.mark.parametrize(
    ("event", "words"),
    [
        (
            {"object": "error", "message": "KV cache full", "type": "InternalServerError"},
            "KV cache full (type InternalServerError)",
        ),
        (
            {"error": {"message": "", "type": "InternalServerError", "code": 500}},
            "an error without a message (type InternalServerError, code 500)",
        ),
        (
            {"choices": [{"index": 0, "text": " late"}]},
            "content after the chunk with finish_reason",
        ),
    ],
)
def test_an_odd_event_mid_stream_fails_with_a_reason_a_person_can_read(
    server: ScriptedServer, tmp_path: Path, event: Any, words: str
) -> None:
    def script(path: str, request: dict[str, Any]) -> Answer:
        events = openai_stream(path, 8, usage(16, 8))
        return Answer([*events[:8], event, *events[8:]])

    server.script = script
    code, summary = load(server, tmp_path)
    assert (summary["verdict"]["status"], code) == ("FAIL", 1)
    assert words in summary["verdict"]["reason"]
    assert "()" not in summary["verdict"]["reason"]
    assert {r["error"][: len(words)] for r in records(tmp_path)} == {words}


def test_throughput_is_the_clients_count_with_the_servers_beside(
    simulated: ScriptedServer, tmp_path: Path
) -> None:
    """A count one off the text's (within what re-tokenisation explains) passes; the
    tokens the rate is made of are the 8 the client counted, not the server's 7."""
    simulated.script = counted(lambda r: usage(prompt_words(r), 7), per_chunk=2)
    code, summary = load(simulated, tmp_path)
    assert_passed(summary)
    assert code == 0
    written = records(tmp_path)
    assert {(r["output_tokens"], r["usage_output_tokens"]) for r in written} == {(8, 7)}
    assert all(r["token_mismatch"] for r in written)
    assert summary["requests"]["token_mismatches"] == 6


@pytest.mark.parametrize(
    ("api", "counts", "words"),
    [
        (
            "completions",
            lambda r: usage(prompt_words(r), 4),
            "usage.completion_tokens 4, but the client counted 8 in its text with rule:whitespace",
        ),
        (
            "completions",
            lambda r: usage(2, 8),
            "usage.prompt_tokens 2, but the client counted 16 in the prompt with rule:whitespace",
        ),
        (
            "completions",
            lambda r: usage(40, 8),
            "usage.prompt_tokens 40, but the client counted 16",
        ),
    ],
)
def test_a_possible_count_that_is_not_this_texts_fails_when_counts_are_exact(
    simulated: ScriptedServer, tmp_path: Path, api: str, counts: Counts, words: str
) -> None:
    """4 chunks of 2 words each: 4 tokens is possible for any text of 4 chunks, but the
    client counted 8 with the model's own rule."""
    simulated.script = counted(counts, per_chunk=2)
    code, summary = load(simulated, tmp_path, "--api", api)
    assert (summary["verdict"]["status"], code) == ("FAIL", 1), summary["verdict"]
    for record in records(tmp_path):
        assert record["error"].startswith(words), record["error"]
        assert record["error_by"] == "server"


def test_a_chat_template_may_add_to_the_prompt_not_take_from_it(
    simulated: ScriptedServer, tmp_path: Path
) -> None:
    """The template's own tokens make a chat prompt longer than its text: not a lie; a
    prompt counted shorter than its text is."""
    simulated.script = counted(lambda r: usage(prompt_words(r) + 40, 8), per_chunk=2)
    code, summary = load(simulated, tmp_path / "longer", "--api", "chat")
    assert_passed(summary)
    assert code == 0
    assert {r["usage_input_tokens"] for r in records(tmp_path / "longer")} == {56}
    simulated.script = counted(lambda r: usage(2, 8), per_chunk=2)
    code, summary = load(simulated, tmp_path / "shorter", "--api", "chat")
    assert (summary["verdict"]["status"], code) == ("FAIL", 1)
    assert "usage.prompt_tokens 2, but the client counted 16" in summary["verdict"]["reason"]
