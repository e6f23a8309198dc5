"""The A/B probe against a canary that cuts its streams short: never a PASS (issue 26).

Two hostile servers (tests/fixtures/hostile.py) give the same words: the stable one answers
whole, the canary cuts each stream (close-delimited, 3 of 8 events). Every canary request is
the server's error, recorded with what happened, and the verdict FAILs — also when the
only criterion is the error rate and the stable side is cut short as well.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from testbed.clients.endpoint import Endpoint
from testbed.config.ab import AbProbe
from testbed.probes.ab import run
from testbed.probes.base import ProbeContext, ProbeOutcome
from testbed.results.files import RecordWriter, read_records
from testbed.results.verdict import Status
from tests.fixtures.hostile import hostile_server

# Loose enough that 40 identical pairs PASS (Wilson lower bound of 40/40 is 0.912); latency
# is not what these tests judge (two loopback servers in one process differ by noise).
CRITERIA = {"min_agreement": 0.9, "max_error_rate_increase": 0.1, "max_ttft_p50_regression": None}


def probe(out: Path, stable_cut: str, canary_cut: str, **config: Any) -> ProbeOutcome:
    with hostile_server(stable_cut) as stable, hostile_server(canary_cut) as canary:
        endpoints = {
            "stable": Endpoint(stable.url, protocols=("openai", "tgi"), model="m"),
            "canary": Endpoint(canary.url, protocols=("openai", "tgi"), model="m"),
        }
        settings = AbProbe.model_validate(
            {"stable": "stable", "canary": "canary", "requests": 40, "max_tokens": 8, **config}
        )
        with RecordWriter(out / "records.jsonl") as records:
            ctx = ProbeContext(endpoints, settings, out, records, seed=7, base_dir=out)
            return asyncio.run(run(ctx))


def test_a_whole_canary_passes(tmp_path: Path) -> None:
    """The control: the same servers, not cutting."""
    outcome = probe(tmp_path, "ok", "ok", criteria=CRITERIA)
    assert outcome.verdict.status == Status.PASS, outcome.verdict.reason


@pytest.mark.parametrize("api", ["completions", "chat", "tgi"])
def test_a_canary_cutting_its_streams_fails(tmp_path: Path, api: str) -> None:
    outcome = probe(tmp_path, "ok", "close", criteria=CRITERIA, api=api)
    assert outcome.verdict.status == Status.FAIL, outcome.verdict.reason
    errors = outcome.summary["ab"]["errors"]
    assert (errors["canary"]["errors"], errors["stable"]["errors"]) == (40, 0)
    assert errors["kinds"]["canary"] == {"stream cut short": 40}
    canary = [r for r in read_records(tmp_path / "records.jsonl") if r["side"] == "canary"]
    assert all(
        r["error"].startswith("stream cut short: the server closed the connection after 3")
        for r in canary
    )


def test_both_sides_cut_short_is_not_a_pass_on_the_error_rate_alone(tmp_path: Path) -> None:
    """No more errors on the canary than on the stable side, yet nothing was answered: the
    canary cannot pass."""
    criteria = {"max_error_rate_increase": 0.1}
    outcome = probe(tmp_path, "before_done", "close", criteria=criteria)
    assert outcome.verdict.status == Status.FAIL, outcome.verdict.reason
    assert "every one of 40 requests to the canary failed" in outcome.verdict.reason
