"""What a test of something other than the load harness may accept from a load verdict.

A load run against a quick server on a shared machine can be INCONCLUSIVE because the load
process doubted its own timing (:mod:`testbed.probes.load.selfcheck`: schedule lag, its CPU
share). That says nothing about a stack, a token, a stream or a backend under test, so such
tests accept it — and only it: every other INCONCLUSIVE, and every FAIL or ERROR, fails them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def harness_doubts(summary: Mapping[str, Any]) -> list[str]:
    """The self-check problems of a load summary, as the verdict's reason words them."""
    stages = summary.get("stages") or [summary]
    return [
        f"{stage.get('stage')}: {problem}"
        for stage in stages
        if stage.get("stage") != "saturation"
        for problem in (stage.get("selfcheck") or {}).get("problems") or []
    ]


def assert_passed(summary: Mapping[str, Any]) -> None:
    """PASS, or INCONCLUSIVE for the harness's self-check alone; no request failed."""
    verdict = summary["verdict"]
    assert summary["requests"]["errors"] == 0, summary["requests"]
    if verdict["status"] == "PASS":
        return
    doubts = harness_doubts(summary)
    assert verdict["status"] == "INCONCLUSIVE", verdict
    assert doubts, verdict
    assert verdict["reason"] == "; ".join(doubts), verdict
