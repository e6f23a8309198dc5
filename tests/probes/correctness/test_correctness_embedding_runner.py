"""Embeddings cases run (issue 37): the example's goldens PASS against the simulator, another
simulator seed FAILs them with the cosine in words, and the server's word is checked — a
vector of other dimensions, a missing vector, twins that differ, a refusal, an unavailable
server — each with the outcome and the reason a person reads."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed.clients.endpoint import Endpoint
from testbed.config.correctness import CorrectnessProbe
from testbed.config.sim import SimParams
from testbed.probes.base import ProbeContext, ProbeOutcome
from testbed.probes.correctness import run
from testbed.results.files import RecordWriter, read_records
from testbed.results.verdict import Status
from testbed.servers.sim import SimServer
from tests.fixtures.scripted import Answer, ScriptedServer, honest, scripted_server

EXAMPLE = Path(__file__).parents[3] / "examples" / "cases" / "sim-embeddings.yaml"
DEPLOYMENT = {"name": "sim", "server": "sim", "params": {"seed": 0}}


async def probe(
    url: str, tmp_path: Path, cases: Path = EXAMPLE
) -> tuple[ProbeOutcome, dict[str, dict[str, Any]], list[dict[str, Any]]]:
    settings = CorrectnessProbe(cases=[str(cases)])
    with RecordWriter(tmp_path / "records.jsonl") as records:
        ctx = ProbeContext(
            {"sim": Endpoint(url, ("openai", "tgi"))},
            settings,
            tmp_path,
            records,
            seed=3,
            deployment=DEPLOYMENT,
        )
        outcome = await run(ctx)
    found = read_records(tmp_path / "records.jsonl")
    return outcome, {r["id"]: r for r in found if r["kind"] == "case"}, found


async def test_the_example_passes_against_the_simulator(tmp_path: Path) -> None:
    async with SimServer(SimParams(seed=0, max_model_len=32)) as server:
        outcome, cases, found = await probe(server.url, tmp_path)
    assert outcome.verdict.status == Status.PASS, outcome.summary
    assert outcome.summary["cases"]["passed"] == 5
    assert set(cases) == {
        "one-input/openai",
        "batch-npy/openai",
        "short-inline/openai",
        "same-input-closest/openai",
        "too-long-refused/openai",
    }  # once each, unary: an embeddings answer has no streaming twin
    assert sorted(found[0]["cases"]) == sorted(cases)  # the plan record names them
    batch = cases["batch-npy/openai"]
    assert batch["request"]["input"] == [
        "first input of a batch", "second input of a batch", "third input of a batch",
    ]  # fmt: skip
    assert batch["request"]["dimensions"] == 64
    assert batch["embeddings"]["dimensions"] == 64
    assert len(batch["embeddings"]["vectors"]) == 3
    assert "output" not in batch  # no text answer: the differential leaves it alone
    assert cases["short-inline/openai"]["request"]["encoding_format"] == "base64"
    assert cases["too-long-refused/openai"]["checks"] == [{"evaluator": "error", "passed": True}]


async def test_another_seed_fails_each_golden_with_its_cosine(tmp_path: Path) -> None:
    async with SimServer(SimParams(seed=1, max_model_len=32)) as server:
        outcome, cases, _ = await probe(server.url, tmp_path)
    assert outcome.verdict.status == Status.FAIL
    assert outcome.summary["cases"] == {
        "total": 5, "passed": 2, "unchecked": 0, "failed": 3, "errored": 0, "skipped": 0,
    }  # fmt: skip
    one = cases["one-input/openai"]
    assert re.fullmatch(r"cosine: -?0\.\d{4} < 0\.99", one["reason"]), one["reason"]
    check = one["checks"][0]
    assert abs(check["actual"]["cosine"][0]) < 0.5  # other vectors, not a rounding slip
    assert check["expected"] == {"threshold": 0.99, "dimensions": [384]}
    batch = cases["batch-npy/openai"]["reason"]
    assert batch.startswith("cosine: input 0 ('first input of a batch'): "), batch
    assert "; input 2 ('third input of a batch'): " in batch
    # what holds for any seed still holds: twins are closest, the long input is refused
    assert cases["same-input-closest/openai"]["status"] == "PASS"
    assert cases["too-long-refused/openai"]["status"] == "PASS"
    first = outcome.summary["failures"][0]
    assert first["evaluator"] == "cosine"


CASES = """\
- {name: one, api: embeddings, request: {input: a}, expected: {embedding: [1, 0, 0, 0]}}
- name: pair
  api: embeddings
  request: {input: [a, b], dimensions: 4}
  expected: {embedding: [[1, 0, 0, 0], [0, 1, 0, 0]]}
- name: twins
  api: embeddings
  request: {input: [a, a, b]}
  evaluate: [{ranking: {anchor: 0, closer: 1, than: 2}}]
"""
UNIT = {"a": [1.0, 0.0, 0.0, 0.0], "b": [0.0, 1.0, 0.0, 0.0]}
Vector = Callable[[str, int], list[float]]


def vectors(make: Vector, *, drop: int = 0) -> Callable[[str, dict[str, Any]], Answer]:
    """A script answering each input with ``make(text, index)`` (``drop`` fewer of them)."""

    def script(path: str, request: dict[str, Any]) -> Answer:
        inputs = request["input"]
        data = [
            {"index": i, "object": "embedding", "embedding": make(text, i)}
            for i, text in enumerate(inputs)
        ]
        body = {"object": "list", "data": data[: len(data) - drop], "model": "m"}
        return Answer(body=body)

    return script


@pytest.fixture(scope="module")
def scripted() -> Iterator[ScriptedServer]:
    with scripted_server() as server:
        yield server


@pytest.fixture
def server(scripted: ScriptedServer) -> Iterator[ScriptedServer]:
    yield scripted
    scripted.script = honest


def outcome_of(
    server: ScriptedServer, tmp_path: Path
) -> tuple[ProbeOutcome, dict[str, dict[str, Any]]]:
    (tmp_path / "cases.yaml").write_text(CASES)
    outcome, cases, _ = asyncio.run(probe(server.url, tmp_path, tmp_path / "cases.yaml"))
    return outcome, cases


def test_a_faithful_server_passes_and_gets_the_inputs_asked(
    server: ScriptedServer, tmp_path: Path
) -> None:
    server.script = vectors(lambda text, _: UNIT[text])
    outcome, cases = outcome_of(server, tmp_path)
    assert outcome.verdict.status == Status.PASS, outcome.summary
    sent = {tuple(body["input"]): body for path, body in server.requests[-3:]}
    assert sent[("a", "b")] == {"model": "scripted-model", "input": ["a", "b"], "dimensions": 4}
    assert cases["twins/openai"]["checks"][0]["passed"]


REASONS = {
    "other-dimensions": (
        vectors(lambda text, _: UNIT[text][:3]),
        {
            "one": "cosine: 3 dimensions, the golden has 4",
            # asked for 4 dimensions: the client refuses the answer itself
            "pair": "answer: the server's error: HTTP 200: embeddings of 3 dimensions, but the"
            " request asked for 4",
        },
    ),
    "a-vector-missing": (
        vectors(lambda text, _: UNIT[text], drop=1),
        {
            "one": "answer: the server's error: HTTP 200: 0 embeddings in the answer to a"
            " request with 1 inputs",
            "pair": "answer: the server's error: HTTP 200: 1 embeddings in the answer to a"
            " request with 2 inputs",
            "twins": "answer: the server's error: HTTP 200: 2 embeddings in the answer to a"
            " request with 3 inputs",
        },
    ),
    "wrong-direction": (
        vectors(lambda text, _: [0.0, 0.0, 1.0, 0.0] if text == "a" else UNIT[text]),
        {
            "one": "cosine: 0.0000 < 0.99",
            "pair": "cosine: input 0 ('a'): 0.0000 < 0.99",
        },
    ),
    "twins-differ": (
        vectors(lambda text, i: [0.0, 0.0, 0.0, 1.0] if i == 1 else UNIT[text]),
        {
            "pair": "cosine: input 1 ('b'): 0.0000 < 0.99",
            "twins": "ranking: input 1 ('a') is not closer to input 0 ('a') than input 2"
            " ('b'): cosine 0.0000 ≤ 0.0000",
        },
    ),
}


@pytest.mark.parametrize("lie", list(REASONS))
def test_a_wrong_answer_fails_its_case_in_words(
    server: ScriptedServer, tmp_path: Path, lie: str
) -> None:
    server.script, reasons = REASONS[lie]
    outcome, cases = outcome_of(server, tmp_path)
    assert outcome.verdict.status == Status.FAIL
    failed = {r["case"]: r["reason"] for r in cases.values() if r["status"] == "FAIL"}
    assert failed == reasons
    assert all(r["status"] == "PASS" for r in cases.values() if r["case"] not in reasons)


@pytest.mark.parametrize(
    ("status", "outcome", "reason"),
    [
        (400, "FAIL", "answer: HTTP 400: the server refused the request: no embeddings here"),
        (503, "ERROR", "server unavailable: HTTP 503: no embeddings here"),
    ],
)
def test_a_refusal_fails_and_an_unavailable_server_is_an_error(
    server: ScriptedServer, tmp_path: Path, status: int, outcome: str, reason: str
) -> None:
    error = {"error": {"message": "no embeddings here", "type": "BadRequestError"}}
    server.script = lambda path, request: Answer(body=error, status=status)
    _, cases = outcome_of(server, tmp_path)
    assert {r["status"] for r in cases.values()} == {outcome}
    assert cases["one/openai"]["reason"] == f"{reason} (type BadRequestError)"


async def test_no_server_is_an_error_not_a_failure(tmp_path: Path) -> None:
    async with SimServer(SimParams(seed=0)) as server:
        url = server.url
    outcome, cases, _ = await probe(url, tmp_path)  # the server is gone
    assert outcome.verdict.status == Status.ERROR
    assert {r["status"] for r in cases.values()} == {"ERROR"}
