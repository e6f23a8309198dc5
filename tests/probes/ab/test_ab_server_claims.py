"""A server's word is checked in the A/B probe too (issue 32): a canary whose counts cannot be
true ("abc", −5, 800 for max_tokens 8, over OpenAI, TGI and TGIS) has each such answer as
its request's error, in the client's words; ``usage_output_tokens`` holds only counts the client
accepted, so the side's token totals neither crash nor add up a lie.

Two scripted servers (tests/fixtures/scripted.py): the stable one honest, the canary lying.
Before, the TGIS sink had no limits (800 passed), and the record kept the count as it came:
``"abc"`` crashed the side's token total (``int("abc")``) and −5 was written as data.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed.clients.endpoint import Endpoint, Protocol
from testbed.config.ab import AbProbe
from testbed.probes.ab import run
from testbed.probes.base import ProbeContext, ProbeOutcome
from testbed.results.files import RecordWriter, read_records
from testbed.results.verdict import Status
from tests.fixtures.scripted import (
    Answer,
    ScriptedServer,
    openai_body,
    openai_stream,
    scripted_server,
    tgi_stream,
    usage,
)

PROTOCOLS: tuple[Protocol, ...] = ("openai", "tgi", "tgis")


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[ScriptedServer, ScriptedServer]]:
    with scripted_server(grpc=True) as stable, scripted_server(grpc=True) as canary:
        yield stable, canary


def counted(completion: Any) -> Callable[[str, Any], Answer]:
    """OpenAI and TGI answers of 8 words, the output counted as ``completion``."""

    def script(path: str, _request: Any) -> Answer:
        if path.startswith("/generate"):
            stream = tgi_stream(8, completion)
            return Answer(stream, body=stream[-1] | {"token": None})
        counts = usage(4, completion)
        return Answer(openai_stream(path, 8, counts), openai_body(path, 8, counts))

    return script


def tgis_counted(generated: int) -> Callable[[bool], list[dict[str, Any]]]:
    def script(_stream: bool) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = [{"input_token_count": 4}]
        messages += [{"text": f" w{i}", "generated_token_count": i + 1} for i in range(8)]
        messages[-1] |= {"generated_token_count": generated, "stop_reason": 1}  # MAX_TOKENS
        return messages

    return script


def probe(
    servers: tuple[ScriptedServer, ScriptedServer], tmp_path: Path, api: str
) -> tuple[ProbeOutcome, list[dict[str, Any]]]:
    """12 pairs over ``api``, max_tokens 8."""
    config = AbProbe.model_validate(
        {"stable": "stable", "canary": "canary", "api": api, "requests": 12, "max_tokens": 8,
         "criteria": {"max_error_rate_increase": 0.1}}
    )  # fmt: skip
    endpoints = {
        name: Endpoint(s.url, PROTOCOLS, model="m", grpc_target=s.grpc_target)
        for name, s in zip(("stable", "canary"), servers, strict=True)
    }

    async def main() -> ProbeOutcome:
        with RecordWriter(tmp_path / "records.jsonl") as records:
            ctx = ProbeContext(endpoints, config, tmp_path, records, seed=3, base_dir=tmp_path)
            return await run(ctx)

    outcome = asyncio.run(main())
    return outcome, [r for r in read_records(tmp_path / "records.jsonl") if r.get("probe") == "ab"]


@pytest.mark.parametrize(
    ("api", "lie", "words"),
    [
        ("completions", '"abc"', 'usage.completion_tokens "abc" is not a count of tokens'),
        ("completions", -5, "usage.completion_tokens -5 is not a count of tokens"),
        ("completions", 800, "usage.completion_tokens 800 is over the request's max_tokens 8"),
        ("chat", "8", 'usage.completion_tokens "8" is not a count of tokens'),
        ("tgi", -5, "usage.completion_tokens -5 is not a count of tokens"),
        ("tgi", 800, "usage.completion_tokens 800 is over the request's max_tokens 8"),
        ("tgis", 800, "usage.completion_tokens 800 is over the request's max_tokens 8"),
    ],
)
def test_a_lying_canarys_answers_are_its_errors(
    servers: tuple[ScriptedServer, ScriptedServer],
    tmp_path: Path,
    api: str,
    lie: Any,
    words: str,
) -> None:
    stable, canary = servers
    stable.script, stable.tgis_script = counted(8), tgis_counted(8)
    value = "abc" if lie == '"abc"' else lie
    canary.script = counted(value)
    canary.tgis_script = tgis_counted(value if isinstance(value, int) else 8)
    outcome, records = probe(servers, tmp_path, api)
    honest = [r for r in records if r["side"] == "stable"]
    lying = [r for r in records if r["side"] == "canary"]
    assert len(honest) == len(lying) == 12
    assert all(r["error"] is None and r["usage_output_tokens"] == 8 for r in honest), honest[0]
    for record in lying:
        assert str(record["error"]).startswith(words), record
        assert record["usage_output_tokens"] is None, record
    errors = outcome.summary["ab"]["errors"]
    assert (errors["canary"]["errors"], errors["stable"]["errors"]) == (12, 0)
    assert outcome.verdict.status == Status.FAIL
    # the sides' token totals: the honest one's 12 × 8, the lying one's unknown (not a sum)
    client = {d: v["client"] for d, v in outcome.summary["server_metrics"]["deployments"].items()}
    assert (client["stable"]["output_tokens"], client["canary"]["output_tokens"]) == (96, None)
