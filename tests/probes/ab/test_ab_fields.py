"""A/B fields that had no test proving they are used (the field audit): the ITL criterion,
the bootstrap's resample count, max_tokens and timeout_s."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from testbed.results.files import read_records
from testbed.results.verdict import Status
from tests.probes.ab.test_ab_probe import probe
from tests.probes.ab.test_ab_verdict import _criterion, _judge, _record, _records

NONE = dict.fromkeys(
    (
        "min_agreement",
        "max_ttft_p50_regression",
        "max_error_rate_increase",
        "max_e2e_p50_regression",
    )
)


def _itl_only_slower(n: int, factor: float) -> list[dict[str, Any]]:
    """Pairs whose canary has the same TTFT and ``factor`` times the inter-token gaps."""
    out = []
    for pair in range(n):
        ttft, itl = 20.0 + (pair % 7), 5.0 + 0.1 * (pair % 5)
        out += [_record("stable", pair, ttft, itl), _record("canary", pair, ttft, factor * itl)]
    return out


def test_max_itl_p50_regression_judges_the_inter_token_latency() -> None:
    records = _itl_only_slower(60, 1.5)
    judged = _judge(records, criteria={**NONE, "max_itl_p50_regression": 0.1})
    assert judged.verdict.status is Status.FAIL
    assert _criterion(judged, "itl_p50")["status"] == "FAIL"
    # The same records judged on TTFT alone pass: only the ITL criterion sees the regression.
    ttft_only = _judge(records, criteria={**NONE, "max_ttft_p50_regression": 0.1})
    assert ttft_only.verdict.status is Status.PASS
    assert all(c["name"] != "itl_p50" for c in ttft_only.summary["ab"]["criteria"])


def test_bootstrap_resamples_sets_the_bootstrap() -> None:
    records = _records(60, slow=1.1)
    few = _judge(records, bootstrap_resamples=200).summary["ab"]
    many = _judge(records, bootstrap_resamples=5000).summary["ab"]
    assert "(200 resamples)" in few["method"]["latency"]
    assert "(5000 resamples)" in many["method"]["latency"]
    # the same seed, another number of resamples: another (percentile) interval
    assert few["latency"]["ttft_ms"]["ci"] != many["latency"]["ttft_ms"]["ci"]


def test_max_tokens_and_timeout_s_reach_every_request(tmp_path: Path) -> None:
    """max_tokens is each answer's length; a canary slower than timeout_s errors out."""
    config = {"requests": 4, "max_tokens": 5, "timeout_s": 0.3}
    probe(tmp_path, {"seed": 1}, {"seed": 1, "ttft_ms": 2000.0}, **config)
    records = read_records(tmp_path / "records.jsonl")
    stable = [r for r in records if r["side"] == "stable"]
    canary = [r for r in records if r["side"] == "canary"]
    assert len(stable) == len(canary) == 4
    assert all(r["error"] is None and r["usage_output_tokens"] == 5 for r in stable)
    assert all(r["error"] and "tim" in r["error"].lower() for r in canary), canary


def test_confidence_sets_the_level_of_every_interval() -> None:
    records = _records(60, slow=1.1)

    def width(level: float) -> float:
        ab = _judge(records, criteria={"confidence": level}).summary["ab"]
        assert ab["confidence"] == level
        low, high = ab["latency"]["ttft_ms"]["ci"]
        return float(high - low)

    assert width(0.99) > width(0.8)


def test_temperature_is_sent_with_every_request() -> None:
    """The simulator decodes greedily whatever the temperature, so the request body itself is
    what shows the field is used."""
    import asyncio

    from testbed.clients.endpoint import Endpoint
    from testbed.config.ab import AbProbe
    from testbed.probes.ab import _target
    from testbed.probes.ab.prompts import Prompt

    async def body(temperature: float) -> dict[str, Any]:
        config = AbProbe(stable="s", canary="c", temperature=temperature, max_tokens=7)
        target = await _target("stable", "s", Endpoint("http://127.0.0.1:9", model="m"), config)
        try:
            return target.body(Prompt(id="p", text="hello"))
        finally:
            await target.pool.aclose()

    assert asyncio.run(body(0.7)) == {
        "model": "m",
        "max_tokens": 7,
        "temperature": 0.7,
        "prompt": "hello",
    }
    assert asyncio.run(body(0.0))["temperature"] == 0.0
