"""The load probe over /v1/embeddings and /v1/responses (issue 37): against the simulator's
known latency, through ``testbed load --api``; an embeddings server that answers the wrong
count or length fails the run; what cannot be measured, or served, is refused (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import ValidationError

from testbed.cli import main
from testbed.config.load import LoadProbe
from testbed.config.protocols import unreachable
from testbed.servers.sim.child import sim_process
from tests.fixtures.scripted import Answer, scripted_server


def _load(url: str, out: Path, *flags: str) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    code = main(["load", url, "--no-plots", "--json", "--out", str(out), *flags])
    summary = json.loads((out / "summary.json").read_text())
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    return code, summary, records


def test_embeddings_are_measured_in_inputs_tokens_and_batches(tmp_path: Path) -> None:
    flags = ["--set", "embedding_ms=20", "--set", "embedding_per_token_ms=0.5"]
    with sim_process(*flags) as url:
        code, summary, records = _load(
            url, tmp_path / "out", "--api", "embeddings", "--batch-size", "4",
            "--input-tokens", "8", "--requests", "12", "--concurrency", "2", "--dimensions", "32",
        )  # fmt: skip
    assert code == 0, summary["requests"]["top_errors"]
    assert [r["inputs"] for r in records] == [4] * 12
    assert all(r["input_tokens"] == 32 and r["usage_input_tokens"] == 32 for r in records)
    assert all(r["chunks_ns"] == [] and r["error"] is None for r in records)
    figures = summary["embeddings"]
    assert figures["batch_size"]["p50"] == 4
    assert figures["batch_size"]["n"] == 12
    # inputs and tokens per second are the requests' rate times the batch and its tokens
    rate = summary["throughput"]["requests_per_s"]
    assert figures["inputs_per_s"] == pytest.approx(4 * rate)
    assert figures["input_tokens_per_s"] == pytest.approx(32 * rate)
    assert summary["e2e_ms"]["p50"] >= 20 + 0.5 * 32  # the simulator's known latency
    assert summary["ttft_ms"]["n"] == 0
    assert summary["setup"]["stream"] is False


def test_responses_are_timed_as_chat_is(tmp_path: Path) -> None:
    with sim_process("--ttft-ms", "30", "--itl-ms", "5") as url:
        code, summary, records = _load(
            url, tmp_path / "out", "--api", "responses", "--input-tokens", "6",
            "--output-tokens", "4", "--requests", "6", "--concurrency", "2",
        )  # fmt: skip
    assert code == 0, summary["requests"]["top_errors"]
    assert all(len(r["chunks_ns"]) == 4 and r["output_tokens"] == 4 for r in records)
    assert all(r["usage_output_tokens"] == 4 and r["usage_input_tokens"] == 6 for r in records)
    assert all(r["finish_reason"] == "length" and r["inputs"] is None for r in records)
    assert summary["ttft_ms"]["p50"] >= 30
    assert summary["itl_ms"]["n"] == 6 * 3


def _wrong_vectors(path: str, body: dict[str, Any]) -> Answer:
    """One vector fewer than the inputs, each of 3 dimensions whatever was asked."""
    data = [{"index": i, "embedding": [0.1, 0.2, 0.3]} for i in range(len(body["input"]) - 1)]
    return Answer(body={"data": data, "usage": {"prompt_tokens": 1, "total_tokens": 1}})


def test_vectors_short_of_the_inputs_fail_the_run_as_the_servers_error(tmp_path: Path) -> None:
    with scripted_server(simulated=True) as server:
        server.script = _wrong_vectors
        code, _summary, records = _load(
            server.url, tmp_path / "out", "--api", "embeddings", "--batch-size", "3",
            "--requests", "4",
        )  # fmt: skip
    assert code == 1
    assert all(r["error_by"] == "server" for r in records)
    assert "2 embeddings in the answer to a request with 3 inputs" in records[0]["error"]
    assert [path for path, _ in server.requests].count("/v1/embeddings") == 4


@pytest.mark.parametrize(
    ("section", "words"),
    [
        (
            {"api": "embeddings", "slo": {"ttft_p99_ms": 50}},
            "slo.ttft_p99_ms: an embeddings answer is one body",
        ),
        ({"api": "chat", "embeddings": {"batch_size": 8}}, "set api: embeddings"),
        (
            {"api": "embeddings", "dataset": {"kind": "trace", "path": "t.jsonl"},
             "profile": "trace"},
            "api embeddings sends prompts, not conversations",
        ),
    ],
)  # fmt: skip
def test_what_an_embeddings_load_cannot_measure_is_refused(
    section: dict[str, Any], words: str
) -> None:
    with pytest.raises(ValidationError, match=words):
        LoadProbe.model_validate(section)


def test_a_batch_size_distribution_is_drawn_per_request() -> None:
    probe = LoadProbe.model_validate({"api": "embeddings", "embeddings": {"batch_size": [2, 8]}})
    assert probe.embeddings is not None
    assert probe.embeddings.batch_size.kind == "list"


class _Deployment:
    def __init__(self, server: str) -> None:
        self.name, self.server = "d", server
        self.params = SimpleNamespace(protocols=())  # the kind's own protocols


@pytest.mark.parametrize("api", ["embeddings", "responses"])
def test_a_server_without_the_endpoint_is_refused_with_the_fix(api: str) -> None:
    problem = unreachable("load", api, _Deployment("hf"))
    assert problem is not None
    assert f"{api} needs /v1/{api}, but deployment 'd' (hf) serves /v1/completions" in problem
    assert "set load.api: completions or chat" in problem
    assert unreachable("load", api, _Deployment("vllm")) is None


def test_testbed_load_refuses_embeddings_flags_for_another_api(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["load", "http://127.0.0.1:9", "--batch-size", "4", "--out", str(tmp_path / "o")])
    assert code == 2
    assert "set api: embeddings" in capsys.readouterr().err
