"""An encoder-decoder (flan-t5's architecture in miniature) through every door of the
reference server: the tiny T5 is built by the session from its config with seeded weights
(``tiny_t5_folder``) and served once (``seq2seq_server``, tests/fixtures/servers.py).

The shipped goldens (examples/cases/tiny-t5.yaml, recorded from ``bundled:tiny-t5``, the
same recipe) pass over OpenAI, TGI and TGIS's gRPC, unary and as streaming twins; greedy
output with logprobs is the same alone and in a batch; a seeded sample repeats; chat is
refused with a 400 because the model has no chat template.
"""

from __future__ import annotations

import http.client
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from testbed.clients.tgis import pool_for
from testbed.config.correctness import CorrectnessProbe
from testbed.execution.single import Provisioned
from testbed.probes.base import ProbeContext, ProbeOutcome
from testbed.probes.correctness import run
from testbed.results.files import RecordWriter, read_records
from testbed.results.verdict import Status

pytestmark = [pytest.mark.reference, pytest.mark.slow]

CASES = Path(__file__).parents[3] / "examples" / "cases" / "tiny-t5.yaml"
MODEL = "tiny-t5"  # the folder's name, as the server announces it
PROMPTS = [
    "translate English to German: The house is wonderful.",
    "summarize: studies have shown that owning a dog is good for you",
    "The capital of France is",
    "Answer the question: what is the capital of France?",
    "Tell me about cats.",
]


def post(server: Provisioned, path: str, body: Any) -> tuple[int, Any]:
    address = server.handle.endpoint.base_url.removeprefix("http://")
    host, port = address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    try:
        conn.request("POST", path, body=json.dumps(body))
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


async def probe(server: Provisioned, folder: Path, protocol: str) -> ProbeOutcome:
    config = CorrectnessProbe(cases=[str(CASES)], protocol=protocol, concurrency=4)  # type: ignore[arg-type]
    with RecordWriter(folder / "records.jsonl") as records:
        ctx = ProbeContext(
            {"t5": server.handle.endpoint}, config, folder, records, seed=5,
            deployment=server.document,
        )  # fmt: skip
        return await run(ctx)


@pytest.mark.parametrize("protocol", ["openai", "tgis"])  # openai: each case's own (tgi too)
async def test_the_goldens_pass_over_every_protocol(
    seq2seq_server: Provisioned, tmp_path: Path, protocol: str
) -> None:
    outcome = await probe(seq2seq_server, tmp_path, protocol)
    counts = outcome.summary["cases"]
    assert outcome.verdict.status == Status.PASS, outcome.summary
    assert counts["failed"] == counts["errored"] == 0
    results = [r for r in read_records(tmp_path / "records.jsonl") if r.get("kind") != "plan"]
    passed = {(r["protocol"], r["stream"]) for r in results if r["status"] == "PASS"}
    # a case's own protocol (both, tgi) still runs; tgis replaces only the default
    wanted = ["openai", "tgi"] if protocol == "openai" else ["tgis"]
    for name in wanted:  # unary and streaming twins
        assert {(name, False), (name, True)} <= passed, passed
    names = {r["case"] for r in results if r["status"] == "PASS"}
    assert {"t5-greedy-logprobs", "t5-long-greedy"} <= names
    if protocol == "openai":  # the chat refusal is an OpenAI answer
        assert "t5-chat-has-no-template" in names


def test_greedy_with_logprobs_is_the_same_alone_and_in_a_batch(
    seq2seq_server: Provisioned,
) -> None:
    def complete(prompt: str) -> tuple[str, list[float]]:
        body = {"model": MODEL, "prompt": prompt, "max_tokens": 12, "temperature": 0,
                "logprobs": 2}  # fmt: skip
        status, answer = post(seq2seq_server, "/v1/completions", body)
        assert status == 200, answer
        choice = answer["choices"][0]
        return choice["text"], choice["logprobs"]["token_logprobs"]

    alone = [complete(p) for p in PROMPTS]
    with ThreadPoolExecutor(len(PROMPTS)) as pool:
        together = list(pool.map(complete, PROMPTS * 2))
    assert together == alone * 2  # texts and logprobs, bit for bit
    assert len({text for text, _ in alone}) == len(PROMPTS)


def test_seeded_sampling_repeats_and_differs_from_greedy(seq2seq_server: Provisioned) -> None:
    body = {"inputs": PROMPTS[4], "parameters": {"max_new_tokens": 10, "do_sample": True,
            "temperature": 0.8, "seed": 7, "details": True}}  # fmt: skip
    first = post(seq2seq_server, "/generate", body)
    with ThreadPoolExecutor(3) as pool:
        again = list(pool.map(lambda _: post(seq2seq_server, "/generate", body), range(3)))
    greedy = post(seq2seq_server, "/generate", {"inputs": PROMPTS[4],
                  "parameters": {"max_new_tokens": 10}})  # fmt: skip
    assert first[0] == 200, first
    assert all(a == first for a in again)
    assert first[1]["details"]["seed"] == 7
    assert first[1]["generated_text"] != greedy[1]["generated_text"]


def test_chat_without_a_template_is_a_clear_400(seq2seq_server: Provisioned) -> None:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}]}
    status, answer = post(seq2seq_server, "/v1/chat/completions", body)
    assert status == 400
    assert "has no chat template" in answer["message"]
    assert "/v1/completions" in answer["message"]


async def test_tgis_model_info_says_encoder_decoder(seq2seq_server: Provisioned) -> None:
    pool = pool_for(seq2seq_server.handle.endpoint)
    try:
        info = await pool.model_info()
    finally:
        await pool.aclose()
    assert info.model_kind == 1  # ENCODER_DECODER
    assert info.max_sequence_length == 512
