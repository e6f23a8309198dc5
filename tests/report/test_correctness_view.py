"""Terminal tables, failure diffs and JUnit cases of correctness results."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from rich.console import Console

from testbed.report.correctness_view import (
    case_table,
    differential_table,
    failure_diff,
    junit_cases,
)

RECORDS = [
    {"kind": "plan", "seed": 3},
    {
        "kind": "case",
        "id": "a/openai",
        "case": "a",
        "protocol": "openai",
        "stream": False,
        "status": "PASS",
        "reason": "",
        "duration_ms": 12.0,
    },
    {
        "kind": "case",
        "id": "b/openai",
        "case": "b",
        "protocol": "openai",
        "stream": False,
        "status": "FAIL",
        "reason": "approx: text differs",
        "duration_ms": 5.0,
        "checks": [{"evaluator": "approx", "passed": False, "detail": "text differs"}],
    },
    {
        "kind": "case",
        "id": "c/tgi",
        "case": "c",
        "protocol": "tgi",
        "stream": True,
        "status": "ERROR",
        "reason": "cannot connect to 127.0.0.1:1",
    },
    {
        "kind": "case",
        "id": "d/openai",
        "case": "d",
        "protocol": "openai",
        "stream": False,
        "status": "SKIPPED",
        "reason": "skipped by single_shard_only",
    },
    {
        "kind": "case",
        "id": "e/openai",
        "case": "e",
        "protocol": "openai",
        "stream": False,
        "status": "UNCHECKED",
        "reason": "answer not compared (skip_check)",
    },
]
FIRST = {
    "index": 1,
    "unit": "token",
    "expected_token": " is",
    "actual_token": " was",
    "common_prefix": " Paris",
    "expected_continuation": " is big",
    "actual_continuation": " was big",
    "margin_nats": 0.02,
    "near_tie": True,
}


def rendered(renderable: object) -> str:
    console = Console(record=True, width=120)
    console.print(renderable)
    return console.export_text()


def test_case_table_lists_every_result_with_counts() -> None:
    text = rendered(case_table(RECORDS, "sim"))
    for fragment in ("a", "FAIL", "ERROR", "SKIPPED", "single_shard_only", "stream", "UNCHECKED"):
        assert fragment in text
    assert "1 pass · 1 unchecked · 1 fail · 1 error · 1 skipped" in text


def test_failure_diff_highlights_the_divergent_token() -> None:
    failure = {
        "case": "b/openai",
        "evaluator": "approx",
        "detail": "text differs",
        "first_divergence": FIRST,
    }
    text = rendered(failure_diff(failure))
    assert "expected: … Paris is big" in text
    assert "actual:   … Paris was big" in text
    assert "margin 0.0200 nats: near-tie" in text
    plain = rendered(failure_diff({"case": "x", "evaluator": "json", "expected": None}))
    assert "expected: null" in plain


def test_differential_table() -> None:
    summary = {
        "compared": 3,
        "identical": 2,
        "near_ties": 1,
        "divergences": [
            {
                **FIRST,
                "case": "b",
                "protocol": "openai",
                "kind": "near_tie",
                "reference_token": " is",
                "other_token": " was",
            }
        ],
    }
    text = rendered(differential_table("bf16", summary))
    assert "bf16 vs reference" in text
    assert "near_tie" in text
    assert "3 compared · 2 identical · 1 near ties" in text


def test_junit_has_one_case_per_result() -> None:
    suite = ET.Element("testsuite")
    counts = junit_cases(suite, RECORDS, "campaign.correctness.sim")
    assert counts == {"tests": 5, "failures": 1, "errors": 1, "skipped": 2}
    names = [case.get("name") for case in suite.iter("testcase")]
    assert names == ["a/openai", "b/openai", "c/tgi", "d/openai", "e/openai"]
    unchecked = suite.find("testcase[@name='e/openai']/skipped")  # never counted as a pass
    assert unchecked is not None
    assert unchecked.get("message") == "UNCHECKED: answer not compared (skip_check)"
    failure = suite.find("testcase[@name='b/openai']/failure")
    assert failure is not None
    assert failure.get("message") == "approx: text differs"
