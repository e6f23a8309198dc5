"""A server's word is checked in correctness too (issue 32): the probe's answers get the
request's limits (max_tokens) and every claim check the load probe has, unary and streamed,
over OpenAI, TGI and TGIS — a lying answer FAILs its case with the client's words.

Against the scripted server (tests/fixtures/scripted.py). Before, the probe's sinks had no
limits (800 tokens for max_tokens 8 passed), and a streamed answer reported only being cut
short: a top-level error object or content after the finish reason passed its stream check.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed.clients.endpoint import Endpoint
from testbed.config.correctness import CorrectnessProbe
from testbed.probes.base import ProbeContext, ProbeOutcome
from testbed.probes.correctness import run
from testbed.results.files import RecordWriter, read_records
from testbed.results.verdict import Status
from tests.fixtures.scripted import (
    Answer,
    ScriptedServer,
    choice,
    honest,
    openai_body,
    openai_stream,
    scripted_server,
    tgi_stream,
    usage,
)

CASES = """\
- name: words
  request: {prompt: Hello, max_new_tokens: 8}
  evaluate: [{regex: "w0"}]
"""
OVER = "usage.completion_tokens 800 is over the request's max_tokens 8"


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with scripted_server(grpc=True) as scripted:
        yield scripted


def probe(
    server: ScriptedServer, tmp_path: Path, protocol: str
) -> tuple[ProbeOutcome, dict[str, dict[str, Any]]]:
    """The correctness probe's one case over ``protocol``, unary and streamed."""
    (tmp_path / "cases.yaml").write_text(CASES)
    settings = CorrectnessProbe(cases=[str(tmp_path / "cases.yaml")], protocol=protocol)
    endpoint = Endpoint(
        server.url, ("openai", "tgi", "tgis"), model="m", grpc_target=server.grpc_target
    )

    async def main() -> ProbeOutcome:
        with RecordWriter(tmp_path / "records.jsonl") as records:
            ctx = ProbeContext({"scripted": endpoint}, settings, tmp_path, records, seed=1)
            return await run(ctx)

    outcome = asyncio.run(main())
    found = read_records(tmp_path / "records.jsonl")
    return outcome, {r["id"]: r for r in found if r["kind"] == "case"}


def openai_lie(counts: Any) -> Callable[[str, Any], Answer]:
    def script(path: str, _request: Any) -> Answer:
        return Answer(openai_stream(path, 8, counts), openai_body(path, 8, counts))

    return script


def tgi_lie(generated: Any) -> Callable[[str, Any], Answer]:
    def script(_path: str, _request: Any) -> Answer:
        stream = tgi_stream(8, generated)
        return Answer(stream, body=stream[-1] | {"token": None})

    return script


def tgis_lie(generated: int) -> Callable[[bool], list[dict[str, Any]]]:
    def script(stream: bool) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = [{"input_token_count": 4}]
        messages += [{"text": f" w{i}", "generated_token_count": i + 1} for i in range(8)]
        messages[-1] |= {"generated_token_count": generated, "stop_reason": 1}  # MAX_TOKENS
        if not stream:
            text = "".join(m.get("text", "") for m in messages)
            return [{**messages[-1], "input_token_count": 4, "text": text}]
        return messages

    return script


@pytest.mark.parametrize("protocol", ["openai", "tgi", "tgis"])
def test_a_count_over_max_tokens_fails_unary_and_streamed(
    server: ScriptedServer, tmp_path: Path, protocol: str
) -> None:
    server.script = openai_lie(usage(4, 800)) if protocol == "openai" else tgi_lie(800)
    server.tgis_script = tgis_lie(800)
    outcome, results = probe(server, tmp_path, protocol)
    assert outcome.verdict.status == Status.FAIL
    for suffix in ("", "/stream"):
        result = results[f"words/{protocol}{suffix}"]
        assert result["status"] == "FAIL", result
        assert OVER in result["reason"], result


@pytest.mark.parametrize("protocol", ["openai", "tgi", "tgis"])
def test_honest_counts_pass(server: ScriptedServer, tmp_path: Path, protocol: str) -> None:
    """The control: the same answers counted right (8 of max_tokens 8) pass."""
    server.script = honest
    server.tgis_script = tgis_lie(8)
    outcome, results = probe(server, tmp_path, protocol)
    assert outcome.verdict.status == Status.PASS, results
    assert {r["status"] for r in results.values()} == {"PASS"}


def test_a_negative_count_fails_the_streamed_answer(server: ScriptedServer, tmp_path: Path) -> None:
    server.script = openai_lie(usage(4, -5))
    _, results = probe(server, tmp_path, "openai")
    for suffix in ("", "/stream"):
        reason = results[f"words/openai{suffix}"]["reason"]
        assert "usage.completion_tokens -5 is not a count of tokens" in reason


def stream_then_honest_body(*events: Any) -> Callable[[str, Any], Answer]:
    """A streamed answer of ``events``; the unary answer honest."""

    def script(path: str, request: Any) -> Answer:
        shown = [e(path) if callable(e) else e for e in events]
        return Answer(shown, honest(path, request).body)

    return script


def word(text: str, finish: str | None = None) -> Callable[[str], Any]:
    return lambda path: {"id": "s", "choices": [choice(text, path, finish=finish)]}


@pytest.mark.parametrize(
    ("events", "words"),
    [
        (
            (
                word(" w0"),
                {"object": "error", "message": "KV cache exhausted", "type": "Internal"},
                {"id": "s", "choices": [], "usage": usage(4, 1)},
                "[DONE]",
            ),
            "KV cache exhausted (type Internal)",
        ),
        (
            (
                word(" w0", "stop"),
                word(" w1"),
                {"id": "s", "choices": [], "usage": usage(4, 2)},
                "[DONE]",
            ),
            "content after the chunk with finish_reason 'stop': ' w1'",
        ),
    ],
    ids=["top-level error", "content after finish"],
)
def test_a_streamed_lie_fails_with_the_servers_words(
    server: ScriptedServer, tmp_path: Path, events: tuple[Any, ...], words: str
) -> None:
    server.script = stream_then_honest_body(*events)
    _, results = probe(server, tmp_path, "openai")
    twin = results["words/openai/stream"]
    assert twin["status"] == "FAIL", twin
    assert words in twin["reason"], twin
    assert results["words/openai"]["status"] == "PASS"


def test_a_unary_lie_is_the_servers_error_not_a_refusal(
    server: ScriptedServer, tmp_path: Path
) -> None:
    server.script = openai_lie(usage(4, 800))
    _, results = probe(server, tmp_path, "openai")
    assert results["words/openai"]["reason"] == f"answer: the server's error: HTTP 200: {OVER}"
