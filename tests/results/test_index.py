"""The results index on SQLite and on a real PostgreSQL: recording runs, replacing a run,
history of one configuration, URL precedence and masking."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.core.errors import InfrastructureError, InputError
from testbed.results.index import (
    ENV_URL,
    ResultsIndex,
    RunEntry,
    TreatmentEntry,
    params_key,
    resolve_url,
    shown,
)


def run_entry(run_id: str, started: str, p99: float, *, tid: str = "abc123") -> RunEntry:
    key = params_key("load", ["sim"], {"load.concurrency": 4})
    return RunEntry(
        run_id=run_id,
        campaign="demo",
        campaign_hash="c0ffee",
        started=started,
        status="PASS",
        testbed_version="0.1.0",
        hostname="box",
        meta={"machine": {"cpu_count": 2}},
        treatments=[
            TreatmentEntry(
                id=tid,
                dir=f"001__sim__{tid}",
                probe="load",
                params_key=key,
                params={"load.concurrency": 4},
                status="PASS",
                metrics={"ttft_ms.p99": p99, "throughput.requests_per_s": 100.0},
            ),
            TreatmentEntry(
                id="other1",
                dir="002__sim__other1",
                probe="load",
                params_key=params_key("load", ["sim"], {"load.concurrency": 8}),
                params={"load.concurrency": 8},
                status="FAIL",
                reason="ttft_ms p99 9 ms > 5 ms",
                metrics={"ttft_ms.p99": 9.0},
            ),
        ],
    )


def test_record_and_history(index_url: str) -> None:
    with ResultsIndex(index_url) as index:
        index.add_run(run_entry("r2", "2026-01-02T00:00:00Z", 12.0))
        index.add_run(run_entry("r1", "2026-01-01T00:00:00Z", 10.0))
        index.add_run(run_entry("r3", "2026-01-03T00:00:00Z", 11.0))
        assert [r.run_id for r in index.runs("demo")] == ["r1", "r2", "r3"]
        assert index.runs("other") == []
        history = index.history("ttft_ms.p99", config_hash="abc123")
        assert [(p.run_id, p.value) for p in history] == [("r1", 10.0), ("r2", 12.0), ("r3", 11.0)]
        assert [
            p.run_id for p in index.history("ttft_ms.p99", config_hash="abc123", exclude=["r3"])
        ] == ["r1", "r2"]
        rows = index.treatments("r1")
        assert [t.status for t in rows] == ["PASS", "FAIL"]
        assert rows[1].reason.startswith("ttft_ms p99")
        assert rows[0].params == {"load.concurrency": 4}


def test_recording_again_replaces_the_run(index_url: str) -> None:
    with ResultsIndex(index_url) as index:
        index.add_run(run_entry("r1", "2026-01-01T00:00:00Z", 10.0))
        index.add_run(run_entry("r1", "2026-01-01T00:00:00Z", 20.0))
        history = index.history("ttft_ms.p99", config_hash="abc123")
        assert [(p.run_id, p.value) for p in history] == [("r1", 20.0)]
        assert len(index.runs()) == 1
        assert len(index.treatments("r1")) == 2
    with ResultsIndex(index_url) as again:  # tables already exist: opening is idempotent
        assert len(again.runs()) == 1


def test_history_by_params_key_pairs_changed_ids(index_url: str) -> None:
    with ResultsIndex(index_url) as index:
        index.add_run(run_entry("r1", "2026-01-01T00:00:00Z", 10.0, tid="old111"))
        index.add_run(run_entry("r2", "2026-01-02T00:00:00Z", 13.0, tid="new222"))
        key = params_key("load", ["sim"], {"load.concurrency": 4})
        assert [p.value for p in index.history("ttft_ms.p99", params_key=key)] == [10.0, 13.0]
        assert [p.value for p in index.history("ttft_ms.p99", config_hash="new222")] == [13.0]
        assert index.history("ttft_ms.p99", params_key=key, campaign_hash="other") == []
        with pytest.raises(ValueError):
            index.history("ttft_ms.p99")


def test_url_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_URL, raising=False)
    assert resolve_url(None, None, tmp_path) == f"sqlite:///{tmp_path.resolve()}/index.sqlite"
    assert resolve_url(None, "sqlite:///c.db", tmp_path) == "sqlite:///c.db"
    monkeypatch.setenv(ENV_URL, "sqlite:///env.db")
    assert resolve_url(None, "sqlite:///c.db", tmp_path) == "sqlite:///env.db"
    assert resolve_url("sqlite:///flag.db", "sqlite:///c.db", tmp_path) == "sqlite:///flag.db"


def test_urls_are_shown_without_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "hunter2" not in shown("postgresql+psycopg://u:hunter2@db:5432/x")
    monkeypatch.setenv("PGPASS_T", "s3cret")
    text = shown("postgresql+psycopg://u:${env:PGPASS_T}@db/x")
    assert "s3cret" not in text
    assert "db" in text


def test_bad_and_unreachable_urls() -> None:
    with pytest.raises(InputError, match="not a database URL"):
        ResultsIndex("not a url")
    # A closed port on loopback: the index reports an infrastructure error, masked.
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(InfrastructureError) as info:
        ResultsIndex(f"postgresql://u:topsecret@127.0.0.1:{port}/x?connect_timeout=2")
    assert "topsecret" not in str(info.value)
