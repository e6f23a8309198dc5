"""``testbed load`` against a server that cuts its streams short: never a PASS (issue 26).

The command a user types, against the hostile server (tests/fixtures/hostile.py): every
request of ``--requests 6 --concurrency 2 --output-tokens 8`` is the server's error, the
verdict FAIL, exit 1, and each record says what happened. The same server not cutting is
the control: PASS, exit 0.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed.cli import main
from tests.fixtures.hostile import HostileServer, hostile_server
from tests.verdicts import assert_passed


@pytest.fixture(scope="module")
def server() -> Iterator[HostileServer]:
    with hostile_server("ok", grpc=True) as hostile:
        yield hostile


def load(server: HostileServer, cut: str, out: Path, *flags: str) -> tuple[int, dict[str, Any]]:
    server.cut = cut
    args = ["load", server.url, "--requests", "6", "--concurrency", "2", "--output-tokens", "8"]
    code = main([*args, "--no-plots", "--out", str(out), *flags])
    return code, json.loads((out / "summary.json").read_text())


def records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("api", ["completions", "chat", "tgi"])
def test_a_server_that_does_not_cut_passes(server: HostileServer, tmp_path: Path, api: str) -> None:
    code, summary = load(server, "ok", tmp_path, "--api", api)
    assert_passed(summary)
    assert code == 0


@pytest.mark.parametrize(
    ("cut", "api", "words"),
    [
        ("close", "completions", "the server closed the connection after 3 text chunks"),
        ("chunked", "completions", "the connection closed mid-body"),
        ("mid_event", "chat", "inside an unfinished event"),
        ("before_done", "chat", "after 8 text chunks, without data: [DONE]"),
        ("chunked_before_done", "tgi", "after 8 text chunks, without the final event"),
        ("no_finish", "completions", "without a finish reason"),
    ],
)
def test_a_stream_cut_short_fails_every_request_as_the_servers_error(
    server: HostileServer, tmp_path: Path, cut: str, api: str, words: str
) -> None:
    code, summary = load(server, cut, tmp_path, "--api", api)
    assert summary["verdict"]["status"] == "FAIL", summary["verdict"]
    assert code == 1
    assert summary["requests"]["errors"] == summary["requests"]["server_errors"] == 6
    written = records(tmp_path)
    assert len(written) == 6
    for record in written:
        assert record["error_by"] == "server"
        assert words in record["error"], record["error"]
    assert words in summary["verdict"]["reason"]


def test_a_unary_answer_without_a_finish_reason_fails(
    server: HostileServer, tmp_path: Path
) -> None:
    code, summary = load(server, "no_finish", tmp_path, "--no-stream")
    assert (summary["verdict"]["status"], code) == ("FAIL", 1)
    assert {r["error"] for r in records(tmp_path)} == {"answer without a finish reason"}


def test_a_tgis_stream_ending_without_a_stop_reason_fails(
    server: HostileServer, tmp_path: Path
) -> None:
    code, summary = load(server, "close", tmp_path, "--api", "tgis", "--grpc", server.grpc_target)
    assert (summary["verdict"]["status"], code) == ("FAIL", 1)
    assert summary["requests"]["server_errors"] == 6
    assert {r["error"] for r in records(tmp_path)} == {
        "stream cut short: the stream ended after 3 text chunks (4 messages), without a stop_reason"
    }
