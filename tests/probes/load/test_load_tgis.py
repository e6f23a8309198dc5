"""The load probe over TGIS's gRPC (``api: tgis``) against the simulator as a child process:
one load process and two, every request recorded, the server's counts equal to the
client's, the paced tokens arriving one message at a time."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed.clients.endpoint import Endpoint
from testbed.config.load import LoadProbe
from testbed.probes.base import ProbeContext
from testbed.probes.load import run
from testbed.results.files import RecordWriter, read_records
from testbed.servers.sim.child import sim_process


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def grpc_sim() -> Iterator[Endpoint]:
    port = _free_port()
    flags = ("--ttft-ms", "5", "--itl-ms", "2", "--protocols", "openai,tgi,tgis")
    with sim_process(*flags, "--grpc-port", str(port)) as url:
        yield Endpoint(url, protocols=("openai", "tgi", "tgis"), grpc_target=f"127.0.0.1:{port}")


@pytest.mark.parametrize("processes", [1, 2])
def test_load_over_grpc(grpc_sim: Endpoint, tmp_path: Path, processes: int) -> None:
    config = LoadProbe.model_validate(
        {
            "api": "tgis",
            "concurrency": 4,
            "duration_s": 1.0,
            "processes": processes,
            "dataset": {"input_tokens": 16, "output_tokens": 24},
            "server_metrics": {"interval_s": 0.2},
        }
    )
    with RecordWriter(tmp_path / "records.jsonl") as records:
        outcome = asyncio.run(run(ProbeContext({"sim": grpc_sim}, config, tmp_path, records)))
    summary = outcome.summary
    written = read_records(tmp_path / "records.jsonl")
    assert len(written) == summary["requests"]["total"] > 10
    assert all(r["error"] is None for r in written), written[0]
    assert {r["usage_output_tokens"] for r in written} == {24}
    assert {r["usage_input_tokens"] for r in written} == {16}
    assert all(len(r["chunks_ns"]) == 24 for r in written)  # one content message per token
    assert not any(r["token_mismatch"] for r in written)
    # paced at the server (token i due at 5 + 2·i ms after arrival, never earlier), so each
    # stream lasts at least that long, and its tokens come in more than one message burst: a
    # server that buffered would send every stream whole. One stream read in one wake-up (its
    # client process descheduled for its ~50 ms on a busy 2-core host) is the host, not that.
    e2e_ms = [(r["done_ns"] - r["sent_ns"]) / 1e6 for r in written]
    assert min(e2e_ms) >= 0.95 * (5.0 + 23 * 2.0)
    bursts = sorted(len(set(r["chunks_ns"])) for r in written)
    assert sum(b > 1 for b in bursts) >= 0.9 * len(bursts), bursts
    assert bursts[len(bursts) // 2] >= 4, bursts  # the median stream: several reads
    server = summary["server_metrics"]["deployments"]["sim"]
    assert server["generation_tokens"] == 24 * len(written)  # nothing lost between processes
    assert summary["setup"]["api"] == "tgis"


def test_tgis_without_a_grpc_address_is_refused(tmp_path: Path) -> None:
    config = LoadProbe.model_validate({"api": "tgis", "requests": 1, "duration_s": None})
    with RecordWriter(tmp_path / "records.jsonl") as records, sim_process() as url:
        ctx = ProbeContext({"sim": Endpoint(url)}, config, tmp_path, records)
        with pytest.raises(Exception, match="no gRPC address"):
            asyncio.run(run(ctx))


def test_the_load_command_over_grpc(
    grpc_sim: Endpoint, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from testbed.cli import main

    argv = ["load", grpc_sim.base_url, "--api", "tgis", "--requests", "8", "--concurrency", "2"]
    assert main([*argv, "--out", str(tmp_path / "bad")]) == 2  # no --grpc: refused
    assert grpc_sim.grpc_target is not None
    assert main([*argv, "--grpc", grpc_sim.grpc_target, "--out", str(tmp_path / "ok")]) == 0
    written = read_records(tmp_path / "ok" / "records.jsonl")
    assert len(written) == 8
    shown = capsys.readouterr().out
    assert "server metrics target:" in shown  # the scraped counts, beside the table
    assert "(0.0% apart)" in shown  # server and client counted the same tokens
    assert "MISMATCH" not in shown
    assert all(r["error"] is None for r in written)
