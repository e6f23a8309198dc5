"""Correctness over TGIS's gRPC against the simulator: goldens recorded over gRPC with
``testbed record``, a campaign run through the pipeline (local backend: the simulator gets a
gRPC port and the endpoint its address), streaming twins, and the stream checks."""

from __future__ import annotations

import json
import socket
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed.cli import main
from testbed.clients.apis import APIS
from testbed.probes.correctness.cases import RequestSpec
from testbed.probes.correctness.exchange import Exchange, build_body
from testbed.probes.correctness.outputs import Output
from testbed.probes.correctness.stream_check import check_stream
from testbed.results.files import read_records
from testbed.servers.sim.child import sim_process

CASES = """\
- name: plain
  request: {prompt: one two three four, max_new_tokens: 6}
- name: with-logprobs
  request: {prompt: alpha beta, max_new_tokens: 3, logprobs: 0, ignore_eos: true}
- name: by-protocol
  request: {prompt: red green, max_new_tokens: 2}
  expected:
    openai: {text: " keep me", completion_tokens: 2, finish_reason: length}
    tgi: {text: " old", completion_tokens: 2, finish_reason: length}
- name: refused
  request: {prompt: x, max_new_tokens: 5000}
  error: {status: 400}
"""


def _campaign(tmp_path: Path) -> Path:
    (tmp_path / "cases.yaml").write_text(CASES)
    campaign = tmp_path / "grpc.yaml"
    campaign.write_text(
        textwrap.dedent(
            """\
            name: grpc
            deployments:
              - name: sim
                server: sim
                params: {protocols: [openai, tgi, tgis], itl_ms: 1.0}
            correctness:
              cases: [cases.yaml]
              protocol: tgis
              reference: sim
            """
        )
    )
    return campaign


def test_record_then_run_over_grpc(tmp_path: Path) -> None:
    campaign = _campaign(tmp_path)
    assert main(["record", str(campaign)]) == 0
    cases = {c["name"]: c for c in yaml.safe_load((tmp_path / "cases.yaml").read_text())}
    plain = cases["plain"]["expected"]
    assert plain["completion_tokens"] == 6
    assert plain["prompt_tokens"] == 4  # TGIS's input_token_count
    assert plain["finish_reason"] == "length"  # MAX_TOKENS, under TGI's name
    assert len(cases["with-logprobs"]["expected"]["logprobs"]) == 3
    by_protocol = cases["by-protocol"]["expected"]
    assert by_protocol["openai"]["text"] == " keep me"  # not recorded now: kept as written
    assert by_protocol["tgis"]["text"] != " old"  # recorded over gRPC beside the tgi answer
    assert cases["refused"]["error"] == {"status": 400}
    out = tmp_path / "run"
    assert main(["run", str(campaign), "--out", str(out)]) == 0
    (folder,) = [p for p in out.iterdir() if (p / "records.jsonl").exists()]
    results = [r for r in read_records(folder / "records.jsonl") if r.get("kind") != "plan"]
    assert {(r["case"], r["stream"]) for r in results} == {
        (name, stream) for name in cases for stream in (False, True)
    }
    assert {r["protocol"] for r in results} == {"tgis"}
    assert all(r["status"] == "PASS" for r in results), [
        r for r in results if r["status"] != "PASS"
    ]
    twin = next(r for r in results if r["case"] == "plain" and r["stream"])
    assert [c["evaluator"] for c in twin["checks"]][:1] == ["stream"]
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["workers"][0]["grpc_port"] > 0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_record_from_a_url_over_grpc(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = tmp_path / "cases.yaml"
    cases.write_text("- name: hi\n  request: {prompt: hi there, max_new_tokens: 3}\n")
    assert main(["record", str(cases), "--url", "http://127.0.0.1:9", "--protocol", "tgis"]) == 2
    assert "--grpc HOST:PORT" in capsys.readouterr().err
    port = _free_port()
    with sim_process("--protocols", "tgis", "--grpc-port", str(port)) as url:
        argv = ["record", str(cases), "--url", url, "--protocol", "tgis"]
        assert main([*argv, "--grpc", f"127.0.0.1:{port}"]) == 0
    (case,) = yaml.safe_load(cases.read_text())
    assert case["expected"]["completion_tokens"] == 3
    assert case["expected"]["prompt_tokens"] == 2


def test_tgis_body_maps_the_neutral_request() -> None:
    spec = RequestSpec.model_validate(
        {"prompt": "p", "max_new_tokens": 4, "temperature": 0.5, "seed": 3, "stop": ["."],
         "ignore_eos": True, "logprobs": 2,
         "extra": {"temperature": -1, "truncate_input_tokens": 9}}
    )  # fmt: skip
    body = build_body(APIS["tgis"], spec, "m", spec.logprobs)
    params: dict[str, Any] = body["params"]
    assert body["requests"] == [{"text": "p"}]
    assert params["method"] == "SAMPLE"
    assert params["sampling"] == {"temperature": -1, "seed": 3}  # extra wins, as elsewhere
    assert params["stopping"] == {"max_new_tokens": 4, "min_new_tokens": 4, "stop_sequences": ["."]}
    assert params["response"]["top_n_tokens"] == 2
    assert params["truncate_input_tokens"] == 9


def _stream(messages: list[dict[str, Any]]) -> Exchange:
    payloads = [json.dumps(m).encode() for m in messages]
    return Exchange("tgis", True, {}, Output(), 200, payloads)


def test_stream_checks_of_a_tgis_stream() -> None:
    good = [
        {"input_token_count": 2, "generated_token_count": 0, "stop_reason": "NOT_FINISHED"},
        {"text": " a", "generated_token_count": 1, "stop_reason": "NOT_FINISHED"},
        {"text": " b", "generated_token_count": 2, "stop_reason": "MAX_TOKENS"},
    ]
    assert check_stream(_stream(good)) == []
    bad = [
        {"generated_token_count": 0},
        {"text": " a", "generated_token_count": 2, "stop_reason": "MAX_TOKENS"},
        {"text": " b", "generated_token_count": 1, "stop_reason": "EOS_TOKEN"},
    ]
    problems = check_stream(_stream(bad))
    assert "the first message does not carry input_token_count" in problems
    assert any("went down" in p for p in problems)
    assert any("2 messages carry a stop_reason" in p for p in problems)


@pytest.mark.parametrize(
    ("section", "fix"),
    [
        ("correctness: {cases: [c.yaml], protocol: tgis}", "add tgis to its params.protocols"),
        ("load: {api: tgis}", "add tgis to its params.protocols"),
    ],
)
def test_a_tgis_probe_needs_a_deployment_that_serves_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], section: str, fix: str
) -> None:
    (tmp_path / "c.yaml").write_text(CASES)
    campaign = tmp_path / "c.yaml.campaign.yaml"
    campaign.write_text(f"name: x\ndeployments:\n  - {{name: s, server: sim}}\n{section}\n")
    assert main(["validate", str(campaign)]) == 2
    err = capsys.readouterr().err
    assert fix in err
    assert f"{campaign}:4" in err  # the line of the probe's section
