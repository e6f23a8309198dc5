"""Shaped load requests (issue 37): headers and an extra body on every request, a dataset
row's own, through one load process and two; a server's refusal of a parameter is the
record's error and the summary's; a secret header is never written; a header the protocol
owns, or a body field testbed owns, is refused before anything is sent (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from testbed.cli import main
from tests.fixtures.scripted import Answer, honest, scripted_server

TOKEN = "sekrit-4242"  # what ${env:TB_SHAPING_TOKEN} holds in these tests
FLAGS = ["--requests", "6", "--concurrency", "2", "--input-tokens", "4", "--output-tokens", "3"]


def _load(url: str, out: Path, *flags: str) -> int:
    return main(["load", url, *FLAGS, "--no-plots", "--out", str(out), *flags])


def _files_text(folder: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file())


@pytest.mark.parametrize("processes", ["1", "2"])
def test_headers_and_extra_body_reach_every_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, processes: str
) -> None:
    monkeypatch.setenv("TB_SHAPING_TOKEN", TOKEN)
    out = tmp_path / "load"
    with scripted_server(simulated=True) as server:
        code = _load(
            server.url,
            out,
            "--processes",
            processes,
            "--header",
            "x-tenant=blue",
            "--header",
            "Authorization=Bearer ${env:TB_SHAPING_TOKEN}",
            "--extra-body",
            '{"temperature": 0.7, "top_p": 0.9, "seed": 11, "stop": ["END"], "logprobs": 2}',
        )
    assert code == 0
    generation = [
        (body, head)
        for (path, body), head in zip(server.requests, server.heads, strict=True)
        if path == "/v1/completions"
    ]
    assert len(generation) == 6
    for body, head in generation:
        assert head["x-tenant"] == "blue"
        assert head["authorization"] == f"Bearer {TOKEN}"
        assert head["content-type"] == "application/json"  # the protocol's own, untouched
        picked = {k: body[k] for k in ("temperature", "top_p", "seed", "stop", "logprobs")}
        assert picked == {"temperature": 0.7, "top_p": 0.9, "seed": 11, "stop": ["END"],
                          "logprobs": 2}  # fmt: skip
        assert body["max_tokens"] == 3
        assert body["stream"] is True
    # discovery and /tokenize pass the same gateway: they carry the headers too
    asked = [(p, h) for (p, _), h in zip(server.requests, server.heads, strict=True)]
    others = [h for p, h in asked if p in ("/v1/models", "/tokenize")]
    assert others
    assert all(h["x-tenant"] == "blue" for h in others)
    assert TOKEN not in _files_text(out)


def test_a_rows_own_model_headers_and_body_go_with_its_prompt(tmp_path: Path) -> None:
    rows = [
        {"prompt": "alpha one x y", "model": "lora-a", "headers": {"x-route": "a"},
         "extra_body": {"temperature": 0.1}},
        {"prompt": "beta two x y", "headers": {"x-route": "b"}, "extra_body": {"top_k": 5}},
        {"prompt": "gamma three x y"},
    ]  # fmt: skip
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "load"
    with scripted_server(simulated=True) as server:
        code = _load(
            server.url, out, "--dataset", str(data), "--extra-body", '{"temperature": 0.5}'
        )
    assert code == 0
    seen: dict[str, tuple[dict[str, Any], dict[str, str]]] = {
        body["prompt"]: (body, head)
        for (path, body), head in zip(server.requests, server.heads, strict=True)
        if path == "/v1/completions"
    }
    alpha, alpha_head = seen["alpha one x y"]
    assert (alpha["model"], alpha["temperature"], alpha_head["x-route"]) == ("lora-a", 0.1, "a")
    beta, beta_head = seen["beta two x y"]
    assert (beta["model"], beta["temperature"], beta["top_k"]) == ("scripted-model", 0.5, 5)
    assert beta_head["x-route"] == "b"
    gamma, gamma_head = seen["gamma three x y"]
    assert gamma["temperature"] == 0.5
    assert "x-route" not in gamma_head
    written = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert {r["model"] for r in written} == {"lora-a", "scripted-model"}


def _refuses_temperature(path: str, request: dict[str, Any]) -> Answer:
    """vLLM's answer to a sampling parameter it refuses: 400 with its error object."""
    if "temperature" in request:
        error = {"message": "temperature must be non-negative, got -1.0.",
                 "type": "BadRequestError", "param": "temperature", "code": 400}  # fmt: skip
        return Answer(status=400, events=[], body={"error": error})
    return honest(path, request)


def test_a_refused_parameter_is_the_records_error_and_the_summarys(tmp_path: Path) -> None:
    out = tmp_path / "load"
    with scripted_server(simulated=True) as server:
        server.script = _refuses_temperature
        code = _load(server.url, out, "--no-stream", "--extra-body", '{"temperature": -1}')
    assert code == 1  # every request failed with the server's answer: FAIL
    said = (
        "HTTP 400: the server refused the request: temperature must be non-negative, got -1.0."
        " (type BadRequestError, param temperature, code 400)"
    )
    written = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert [r["error"] for r in written] == [said] * 6
    assert all(r["error_by"] == "server" for r in written)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["requests"]["top_errors"] == {said: 6}
    assert said in summary["verdict"]["reason"]


def test_an_echoed_secret_is_masked_in_the_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TB_SHAPING_TOKEN", TOKEN)

    def echo(path: str, request: dict[str, Any]) -> Answer:
        error = {"message": f"token {TOKEN} is not valid for this tenant", "code": 403}
        return Answer(status=403, body={"error": error})

    out = tmp_path / "load"
    with scripted_server(simulated=True) as server:
        server.script = echo
        _load(server.url, out, "--no-stream", "--header", "x-api-key=${env:TB_SHAPING_TOKEN}")
    written = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert written
    assert all("token *** is not valid" in r["error"] for r in written)
    assert TOKEN not in _files_text(out)


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--header", "Content-Type=text/plain"], "header Content-Type is the protocol's own"),
        (["--header", "host=elsewhere"], "header host is the protocol's own"),
        (["--header", "Content-Length=3"], "header Content-Length is the protocol's own"),
        (["--header", "x-request-id=mine"], "header x-request-id is the protocol's own"),
        (["--header", "Authorization=Bearer sk-live"], "carries a secret"),
        (["--header", "x-a=1", "--header", "X-A=2"], "X-A is given twice"),
        (["--header", "novalue"], "give NAME=VALUE"),
        (["--extra-body", '{"stream": false}'], "extra_body.stream: testbed sets it"),
        (["--extra-body", '{"model": "x"}'], "extra_body.model: testbed sets it"),
        (["--extra-body", "[1]"], "give a JSON object"),
        (["--models", "a,a"], "a given twice"),
        (["--models", "a,b", "--model", "c"], "not both"),
    ],
)
def test_a_bad_shape_is_refused_before_any_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], said: str
) -> None:
    out = tmp_path / "load"
    with scripted_server(simulated=True) as server:
        assert _load(server.url, out, *flags) == 2
    assert said in capsys.readouterr().err
    assert not any(path == "/v1/completions" for path, _ in server.requests)
    assert not out.exists()


def test_a_rows_protocol_header_is_refused_naming_its_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "rows.jsonl"
    data.write_text('{"prompt": "a"}\n{"prompt": "b", "headers": {"Host": "x"}}\n')
    with scripted_server(simulated=True) as server:
        assert _load(server.url, tmp_path / "load", "--dataset", str(data)) == 2
    assert "rows.jsonl: row 2: header Host is the protocol's own" in capsys.readouterr().err
