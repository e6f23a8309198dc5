"""Shaped A/B requests (issue 37): ``ab.headers`` and ``ab.extra_body`` reach both sides'
every request (tgi: into ``parameters``); what load refuses, ab refuses too."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from testbed.clients.endpoint import Endpoint
from testbed.config.ab import AbProbe
from testbed.probes.ab import run
from testbed.probes.base import ProbeContext
from testbed.results.files import RecordWriter
from tests.fixtures.scripted import ScriptedServer, scripted_server


def _run(stable: ScriptedServer, canary: ScriptedServer, tmp_path: Path, **shape: Any) -> None:
    config = AbProbe.model_validate(
        {"stable": "stable", "canary": "canary", "requests": 4, "max_tokens": 8, **shape}
    )
    endpoints = {
        name: Endpoint(s.url, ("openai", "tgi"), model="m")
        for name, s in (("stable", stable), ("canary", canary))
    }

    async def main() -> None:
        with RecordWriter(tmp_path / "records.jsonl") as records:
            await run(ProbeContext(endpoints, config, tmp_path, records, seed=3))

    asyncio.run(main())


@pytest.mark.parametrize(("api", "where"), [("completions", None), ("tgi", "parameters")])
def test_both_sides_get_the_headers_and_the_body(tmp_path: Path, api: str, where: str) -> None:
    with scripted_server() as stable, scripted_server() as canary:
        _run(
            stable,
            canary,
            tmp_path,
            api=api,
            headers={"x-tenant": "blue"},
            extra_body={"top_p": 0.5, "seed": 9},
        )
    for server in (stable, canary):
        sent = [
            (body, head)
            for (path, body), head in zip(server.requests, server.heads, strict=True)
            if path in ("/v1/completions", "/generate_stream", "/generate")
        ]
        assert len(sent) == 4
        for body, head in sent:
            fields = body[where] if where else body
            assert (fields["top_p"], fields["seed"]) == (0.5, 9)
            assert head["x-tenant"] == "blue"


@pytest.mark.parametrize(
    ("shape", "said"),
    [
        ({"headers": {"Host": "x"}}, "header Host is the protocol's own"),
        ({"headers": {"x-api-key": "literal"}}, "carries a secret"),
        ({"extra_body": {"max_tokens": 3}}, "extra_body.max_tokens: testbed sets it"),
        ({"extra_body": {"temperature": 1}}, "ab has its own `temperature`"),
    ],
)
def test_a_bad_shape_is_refused(shape: dict[str, Any], said: str) -> None:
    with pytest.raises(ValidationError, match=said):
        AbProbe.model_validate({"stable": "a", "canary": "b", **shape})
