"""Each load request carries an id, recorded with its record, so that a record joins its
line in the server's log (issue 36): the ``x-request-id`` header over HTTP, the same key in
the gRPC metadata for TGIS. The simulator logs it (``log_requests``) and echoes the header.

Also: the run's wall-clock anchor beside the monotonic stamps, and records.csv /
summary.csv beside the JSON, with the published columns first.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import socket
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from testbed.cli import main
from testbed.config.sim import SimParams
from testbed.results.tables import LOAD_RECORD
from testbed.servers.sim import serve_in_thread

FLAGS = ["--concurrency", "2", "--requests", "12", "--output-tokens", "4", "--no-plots"]


def logged_ids(out: str) -> dict[str, str]:
    """The simulator's request lines: request id → path."""
    lines = [line.split() for line in out.splitlines() if line.startswith("request ")]
    return {parts[1]: parts[3] for parts in lines}


def records(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "records.jsonl").read_text().splitlines()]


def test_each_http_record_joins_its_log_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "load"
    with serve_in_thread(SimParams(log_requests=True)) as url:
        assert main(["load", url, *FLAGS, "--out", str(out)]) == 0
    logged = logged_ids(capsys.readouterr().out)
    written = records(out)
    ids = [r["request_id"] for r in written]
    assert len(set(ids)) == len(written) == 12
    prefix = json.loads((out / "summary.json").read_text())["setup"]["request_ids"]
    assert all(i == f"{prefix}-{r['n']}" for i, r in zip(ids, written, strict=True))
    assert {i: logged.get(i) for i in ids} == dict.fromkeys(ids, "/v1/completions")


def test_each_tgis_record_joins_its_log_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    params = SimParams(log_requests=True, protocols=["openai", "tgis"])
    out = tmp_path / "tgis"
    with serve_in_thread(params, grpc_port=port) as url:
        grpc = ["--api", "tgis", "--grpc", f"127.0.0.1:{port}"]
        assert main(["load", url, *grpc, *FLAGS, "--out", str(out)]) == 0
    logged = logged_ids(capsys.readouterr().out)
    ids = [r["request_id"] for r in records(out)]
    assert len(set(ids)) == 12
    assert {logged.get(i) for i in ids} == {"/fmaas.GenerationService/GenerateStream"}


def test_the_simulator_echoes_the_request_id() -> None:
    with serve_in_thread(SimParams()) as url:
        request = urllib.request.Request(f"{url}/health", headers={"x-request-id": "abc-7"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.headers["x-request-id"] == "abc-7"
        with urllib.request.urlopen(f"{url}/health", timeout=10) as answer:
            assert answer.headers["x-request-id"] is None


def test_records_have_a_wall_clock_anchor_and_csv_tables(tmp_path: Path) -> None:
    out = tmp_path / "load"
    before = dt.datetime.now(dt.UTC)
    with serve_in_thread(SimParams()) as url:
        assert main(["load", url, *FLAGS, "--out", str(out)]) == 0
    after = dt.datetime.now(dt.UTC)
    clock = json.loads((out / "summary.json").read_text())["setup"]["clock"]
    assert set(clock) == {"wall_ns", "monotonic_ns"}
    with (out / "records.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 12
    header = list(rows[0])
    published = [k for k in LOAD_RECORD if k in header]  # text: with keep_text only
    assert header == [*published, "sent_at", "done_at"]  # nothing the schema does not publish
    assert {"request_id", "sent_ns", "chunks_ns", "output_tokens"} <= set(published)
    for row in rows:
        sent = dt.datetime.fromisoformat(row["sent_at"])
        assert before <= sent <= after
        assert json.loads(row["chunks_ns"])  # a list is one JSON cell
    with (out / "summary.csv").open(newline="") as handle:
        (summary,) = list(csv.DictReader(handle))
    # the table says what summary.json says (the verdict itself rides on the host's load)
    status = json.loads((out / "summary.json").read_text())["verdict"]["status"]
    assert (summary["dir"], summary["probe"], summary["status"]) == (".", "load", status)
    assert float(summary["ttft_ms.p50"]) > 0


def test_every_record_field_is_published() -> None:
    """docs/results.md lists every column of LOAD_RECORD (the published schema)."""
    docs = (Path(__file__).parents[3] / "docs" / "results.md").read_text()
    missing = [name for name in LOAD_RECORD if f"| `{name}` |" not in docs]
    assert missing == []
