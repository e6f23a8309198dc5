"""Streaming twins of refused requests (issue 32): a twin passes only when its own answer is
right — a well-formed stream, or the refusal its case expects — and agrees with the unary one.

Two refusals with one status agree with each other; before issue 32 that alone made the twin
PASS, so a server refusing everything showed "2 of 4 failed" where all 4 had.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from testbed.clients.endpoint import Endpoint
from testbed.config.correctness import CorrectnessProbe
from testbed.config.sim import SimParams
from testbed.probes.base import ProbeContext, ProbeOutcome
from testbed.probes.correctness import run
from testbed.results.files import RecordWriter, read_records
from testbed.results.verdict import Status
from testbed.servers.sim import SimServer

# The simulator answers 404 ("the model ... does not exist") to another model name.
CASES = textwrap.dedent(
    """\
    - name: golden
      request: {prompt: Hello, max_new_tokens: 4, extra: {model: no-such-model}}
      expected: {text: " a b c d", finish_reason: length}
    - name: regex
      request: {prompt: Hello, max_new_tokens: 4, extra: {model: no-such-model}}
      evaluate: [{regex: "."}]
    - name: unchecked
      request: {prompt: Hello, max_new_tokens: 4, extra: {model: no-such-model}}
      skip_check: true
    - name: wrong-refusal
      request: {prompt: Hello, max_new_tokens: 4, extra: {model: no-such-model}}
      error: {status: 400}
    - name: right-refusal
      request: {prompt: Hello, max_new_tokens: 4, extra: {model: no-such-model}}
      error: {status: 404, message: does not exist}
    """
)


async def probe(tmp_path: Path, cases: str) -> tuple[ProbeOutcome, dict[str, dict[str, Any]]]:
    path = tmp_path / "cases.yaml"
    path.write_text(cases)
    settings = CorrectnessProbe(cases=[str(path)], protocol="openai")
    async with SimServer(SimParams(seed=0, max_model_len=256)) as server:
        with RecordWriter(tmp_path / "records.jsonl") as records:
            endpoint = Endpoint(server.url, ("openai", "tgi"))
            ctx = ProbeContext({"sim": endpoint}, settings, tmp_path, records, seed=7)
            outcome = await run(ctx)
    found = read_records(tmp_path / "records.jsonl")
    return outcome, {r["id"]: r for r in found if r["kind"] == "case"}


async def test_a_refused_twin_fails_like_its_unary_request(tmp_path: Path) -> None:
    outcome, results = await probe(tmp_path, CASES)
    assert outcome.verdict.status == Status.FAIL
    for name in ("golden", "regex", "unchecked"):
        for suffix in ("", "/stream"):
            result = results[f"{name}/openai{suffix}"]
            assert result["status"] == "FAIL", result
            assert "refused: HTTP 404" in result["reason"], result
    twin = results["golden/openai/stream"]
    agreed = next(c for c in twin["checks"] if c["evaluator"] == "stream=unary")
    assert agreed["passed"]  # the two refusals agree; the twin fails all the same
    counts = outcome.summary["cases"]
    assert (counts["total"], counts["passed"], counts["failed"]) == (10, 2, 8)


async def test_a_twin_is_held_to_the_refusal_its_case_expects(tmp_path: Path) -> None:
    _, results = await probe(tmp_path, CASES)
    wrong = results["wrong-refusal/openai/stream"]
    assert wrong["status"] == "FAIL"
    assert "status 404, expected 400" in wrong["reason"]
    assert results["right-refusal/openai/stream"]["status"] == "PASS"
    assert results["right-refusal/openai"]["status"] == "PASS"


async def test_a_twin_that_answers_a_case_expecting_a_refusal_fails(tmp_path: Path) -> None:
    cases = textwrap.dedent(
        """\
        - name: should-refuse
          request: {prompt: Hello, max_new_tokens: 4}
          error: {status: 400}
        """
    )
    _, results = await probe(tmp_path, cases)
    twin = results["should-refuse/openai/stream"]
    assert twin["status"] == "FAIL"
    assert "expected an error, got an answer" in twin["reason"]
