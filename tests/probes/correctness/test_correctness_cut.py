"""The correctness probe against a server that cuts its answers short: never a PASS (issue 26).

One golden case per protocol (OpenAI completions and chat, TGI, TGIS over gRPC) against the
hostile server (tests/fixtures/hostile.py): its whole answers pass (the control); a stream
cut short fails the streaming twin even when the unary answer is whole; a unary answer cut
short (or without a finish reason) fails the case.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed.clients.endpoint import Endpoint
from testbed.config.correctness import CorrectnessProbe
from testbed.probes.base import ProbeContext
from testbed.probes.correctness import run
from testbed.results.files import RecordWriter, read_records
from testbed.results.verdict import Status
from tests.fixtures.hostile import HostileServer, hostile_server

CASES = textwrap.dedent(
    """\
    - name: words
      protocol: {protocol}
      request: {{prompt: hi, max_new_tokens: 8}}
      expected: {{text: " w0 w1 w2 w3 w4 w5 w6 w7", finish_reason: length}}
    """
)
CHAT = textwrap.dedent(
    """    - name: chat
      request: {messages: [{role: user, content: hi}], max_new_tokens: 8}
      expected: {text: " w0 w1 w2 w3 w4 w5 w6 w7", finish_reason: length}
    """
)


@pytest.fixture(scope="module")
def server() -> Iterator[HostileServer]:
    with hostile_server("ok", grpc=True) as hostile:
        yield hostile


async def probe(
    server: HostileServer, tmp_path: Path, protocol: str
) -> tuple[Status, list[dict[str, Any]]]:
    cases = tmp_path / "cases.yaml"
    cases.write_text(CASES.format(protocol=protocol) + (CHAT if protocol == "openai" else ""))
    settings = CorrectnessProbe(cases=[str(cases)], protocol=protocol, timeout_s=10)  # type: ignore[arg-type]
    endpoint = Endpoint(
        server.url, ("openai", "tgi", "tgis"), model="m", grpc_target=server.grpc_target
    )
    with RecordWriter(tmp_path / "records.jsonl") as records:
        ctx = ProbeContext({"hostile": endpoint}, settings, tmp_path, records, seed=7)
        outcome = await run(ctx)
    cases_run = [r for r in read_records(tmp_path / "records.jsonl") if r["kind"] == "case"]
    return outcome.verdict.status, cases_run


async def failed(
    server: HostileServer, tmp_path: Path, protocol: str, *, stream: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The probe FAILs, and every case of the cut side (streamed or not) FAILs: all the
    cases and that side's."""
    status, cases = await probe(server, tmp_path, protocol)
    assert status == Status.FAIL
    side = [c for c in cases if c["stream"] is stream]
    assert side
    assert {c["status"] for c in side} == {"FAIL"}
    return cases, side


def _reasons(cases: list[dict[str, Any]], *, stream: bool) -> list[str]:
    return [c["reason"] for c in cases if c["stream"] is stream]


@pytest.mark.parametrize("protocol", ["openai", "tgi", "tgis"])
async def test_whole_answers_pass(server: HostileServer, tmp_path: Path, protocol: str) -> None:
    server.cut, server.unary_cut = "ok", None
    status, cases = await probe(server, tmp_path, protocol)
    assert status == Status.PASS, cases
    assert {c["status"] for c in cases} == {"PASS"}
    assert {c["stream"] for c in cases} == {True, False}  # the twins ran


@pytest.mark.parametrize(
    ("protocol", "cut", "words"),
    [
        ("openai", "close", "the server closed the connection after 3 text chunks"),
        ("openai", "chunked", "the connection closed mid-body (chunked body without its last"),
        ("openai", "before_done", "the server closed the connection after 8 text chunks"),
        ("tgi", "mid_event", "the server closed the connection inside an unfinished event"),
        ("tgi", "chunked_before_done", "the stream ended after 8 text chunks"),
        ("tgis", "close", "the stream ended after 3 text chunks (4 messages)"),
    ],
)
async def test_a_stream_cut_short_fails_the_twin(
    server: HostileServer, tmp_path: Path, protocol: str, cut: str, words: str
) -> None:
    server.cut, server.unary_cut = cut, "ok"
    cases, twins = await failed(server, tmp_path, protocol, stream=True)
    assert {c["status"] for c in cases if not c["stream"]} == {"PASS"}
    # the client's account of the cut leads the stream check's problems
    lead = f"stream: stream cut short: {words}"
    assert all(c["reason"].startswith(lead) for c in twins), _reasons(cases, stream=True)


@pytest.mark.parametrize(
    ("protocol", "cut", "words"),
    [
        ("openai", "mid_event", "bytes of its Content-Length missing"),
        ("openai", "no_finish", "answer without a finish reason"),
        ("tgi", "chunked", "response body cut short"),
        ("tgis", "no_finish", "answer without a stop_reason"),
    ],
)
async def test_a_unary_answer_cut_short_fails_the_case(
    server: HostileServer, tmp_path: Path, protocol: str, cut: str, words: str
) -> None:
    server.cut, server.unary_cut = "ok", cut
    cases, unary = await failed(server, tmp_path, protocol, stream=False)
    assert all(words in c["reason"] for c in unary), _reasons(cases, stream=False)
