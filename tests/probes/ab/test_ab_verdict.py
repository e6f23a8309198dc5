"""The A/B verdict from records with known properties: each criterion's three outcomes, the
minimum sample, the evidence every criterion carries, and split-mode analysis."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from testbed.config.ab import AbProbe
from testbed.probes.ab import analyse
from testbed.probes.base import ProbeOutcome
from testbed.results.verdict import Status

MS = 1_000_000


def _record(
    side: str,
    pair: int,
    ttft_ms: float,
    itl_ms: float,
    *,
    text: str = "same",
    error: str | None = None,
    tokens: int = 8,
    prompt: str | None = None,
) -> dict[str, Any]:
    sent = 1_000 * MS * pair + (0 if side == "stable" else 1)
    chunks = [sent + round((ttft_ms + i * itl_ms) * MS) for i in range(tokens)]
    return {
        "side": side,
        "pair": pair,
        "seq": 2 * pair + (side == "canary"),
        "prompt_id": prompt or f"p{pair}",
        "sent_ns": sent,
        "chunks_ns": [] if error else chunks,
        "done_ns": None if error else chunks[-1] + MS,
        "status": 500 if error else 200,  # the records' errors are the server's HTTP 500
        "error": error,
        "error_kind": "server" if error else None,
        "text": "" if error else text,
    }


def _records(
    n: int,
    *,
    slow: float = 1.0,
    differ_every: int = 0,
    canary_errors: int = 0,
    seed: int = 0,
) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    out = []
    for pair in range(n):
        base = float(rng.lognormal(np.log(20), 0.3))  # a per-prompt effect shared by the pair
        noise_s, noise_c = rng.lognormal(0, 0.05, size=2)
        out.append(_record("stable", pair, base * noise_s, 5 * noise_s))
        differ = differ_every and pair % differ_every == 0
        error = "HTTP 500: boom" if pair < canary_errors else None
        out.append(
            _record(
                "canary",
                pair,
                slow * base * noise_c,
                slow * 5 * noise_c,
                text="other" if differ else "same",
                error=error,
            )
        )
    return out


def _judge(records: list[dict[str, Any]], **config: Any) -> ProbeOutcome:
    probe = AbProbe.model_validate({"stable": "s", "canary": "c", **config})
    return asyncio.run(analyse(records, probe, seed=1, scorer=None))


def _criterion(outcome: ProbeOutcome, name: str) -> dict[str, Any]:
    return next(e for e in outcome.summary["ab"]["criteria"] if e["name"] == name)


def test_identical_sides_pass_every_criterion() -> None:
    outcome = _judge(_records(120))
    assert outcome.verdict.status is Status.PASS, outcome.verdict.reason
    ab = outcome.summary["ab"]
    assert ab["n_pairs"] == 120
    assert ab["agreement"]["exact"] == 1.0
    assert {e["name"] for e in ab["criteria"]} == {"agreement", "ttft_p50", "error_rate"}
    for entry in ab["criteria"]:
        for key in ("observed", "interval", "threshold", "n", "test", "p_value", "status"):
            assert entry[key] is not None, (entry["name"], key)
        assert entry["p_value"] < 0.05  # the pass is shown, not presumed


def test_slower_canary_fails_with_its_evidence() -> None:
    outcome = _judge(_records(60, slow=1.3), criteria={"max_e2e_p50_regression": 0.1})
    assert outcome.verdict.status is Status.FAIL
    ttft = _criterion(outcome, "ttft_p50")
    assert ttft["status"] == "FAIL"
    assert ttft["interval"][0] > 1.1
    assert ttft["observed"] == pytest.approx(1.3, rel=0.05)
    assert ttft["p_violates"] < 1e-6
    assert ttft["p_value"] == ttft["p_violates"]
    assert "ttft_p50 FAIL" in outcome.verdict.reason
    assert outcome.verdict.evidence["criteria"] == outcome.summary["ab"]["criteria"]
    latency = outcome.summary["ab"]["latency"]["e2e_ms"]
    assert latency["wilcoxon_p"] < 1e-6
    assert latency["shift_ms"] > 0


def test_a_regression_inside_the_tolerance_passes() -> None:
    outcome = _judge(_records(120, slow=1.03), criteria={"max_ttft_p50_regression": 0.2})
    assert _criterion(outcome, "ttft_p50")["status"] == "PASS"


def test_a_regression_near_the_threshold_is_inconclusive() -> None:
    # 10 % slower against a 10 % tolerance: the interval straddles 1.10.
    outcome = _judge(_records(60, slow=1.10))
    ttft = _criterion(outcome, "ttft_p50")
    assert ttft["status"] == "INCONCLUSIVE"
    assert "straddles" in ttft["reason"]
    assert outcome.verdict.status is Status.INCONCLUSIVE


@pytest.mark.parametrize(
    ("differ_every", "status"), [(0, "PASS"), (3, "FAIL"), (40, "INCONCLUSIVE")]
)
def test_agreement_outcomes(differ_every: int, status: str) -> None:
    # 120 pairs: all agree ([0.969, 1] ≥ 0.95); a third differ; 3 differ ([0.929, 0.991]).
    entry = _criterion(_judge(_records(120, differ_every=differ_every)), "agreement")
    assert entry["status"] == status, entry["reason"]


def test_error_rate_outcomes() -> None:
    failing = _criterion(_judge(_records(100, canary_errors=20)), "error_rate")
    assert failing["status"] == "FAIL"
    assert failing["observed"] == pytest.approx(0.2)
    assert failing["interval"][0] > 0.05
    passing = _criterion(_judge(_records(100)), "error_rate")
    assert passing["status"] == "PASS"


def test_too_few_pairs_is_inconclusive_even_when_glaring() -> None:
    outcome = _judge(_records(10, slow=3.0, differ_every=1))
    assert outcome.verdict.status is Status.INCONCLUSIVE
    assert all("min_samples" in e["reason"] for e in outcome.summary["ab"]["criteria"])


def test_a_probe_without_criteria_is_refused() -> None:
    """It could never FAIL: refused when the campaign is validated (exit 2), not run."""
    none = dict.fromkeys(["min_agreement", "max_ttft_p50_regression", "max_error_rate_increase"])
    with pytest.raises(ValidationError, match="set at least one of min_agreement"):
        AbProbe.model_validate({"stable": "s", "canary": "c", "criteria": none})
    one = {**none, "max_e2e_p50_regression": 0.2}
    outcome = _judge(_records(60), criteria=one)
    assert [e["name"] for e in outcome.summary["ab"]["criteria"]] == ["e2e_p50"]


def test_failed_requests_leave_latency_but_count_as_errors() -> None:
    outcome = _judge(_records(60, canary_errors=6))
    ab = outcome.summary["ab"]
    assert ab["n_pairs"] == 54
    assert ab["errors"]["canary"] == {"errors": 6, "sent": 60, "rate": 0.1}
    assert ab["errors"]["kinds"]["canary"] == {"HTTP 500": 6}
    assert ab["latency"]["ttft_ms"]["n"] == 54


def test_split_mode_compares_unpaired_and_agreement_over_shared_prompts() -> None:
    records = []
    rng = np.random.default_rng(3)
    for i in range(160):
        side = "canary" if i % 2 else "stable"
        slow = 1.4 if side == "canary" else 1.0
        rec = _record(
            side, i, slow * float(rng.lognormal(np.log(20), 0.2)), 5 * slow, prompt=f"p{i % 40}"
        )
        records.append(rec)
    outcome = _judge(records, mode="split")
    ab = outcome.summary["ab"]
    assert ab["n_pairs"] is None
    assert ab["agreement"]["n"] == 0  # prompts alternate sides: none reached both …
    assert ab["latency"]["ttft_ms"]["wilcoxon_p"] is None
    assert ab["latency"]["ttft_ms"]["n"] == [80, 80]
    assert _criterion(outcome, "ttft_p50")["status"] == "FAIL"
    assert "Mann–Whitney" in _criterion(outcome, "ttft_p50")["test"]
    assert _criterion(outcome, "agreement")["status"] == "INCONCLUSIVE"  # … so no verdict


def test_embedding_scores_decide_agreement_when_configured() -> None:
    records = _records(100, differ_every=2)

    async def scorer(a: str, b: str) -> float:
        return 0.97  # paraphrases: different texts, same meaning

    probe = AbProbe(stable="s", canary="c", similarity="embedding", similarity_threshold=0.9)
    outcome = asyncio.run(analyse(records, probe, seed=1, scorer=scorer))
    agreement = outcome.summary["ab"]["agreement"]
    assert agreement["exact"] == 0.5
    assert agreement["similarity"] == 1.0
    assert _criterion(outcome, "agreement")["status"] == "PASS"


def test_an_empty_answer_is_an_output_not_an_error() -> None:
    records = _records(40)
    for record in records[:4]:  # the model stopped at once on both sides of two pairs
        record["chunks_ns"], record["text"] = [], ""
    ab = _judge(records).summary["ab"]
    assert ab["errors"]["stable"]["errors"] == ab["errors"]["canary"]["errors"] == 0
    assert ab["agreement"]["n"] == 40
    assert ab["agreement"]["exact"] == 1.0
    assert ab["latency"]["ttft_ms"]["n"] == 38
    assert ab["latency"]["e2e_ms"]["n"] == 40
