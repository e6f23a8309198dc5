"""Evaluators, the first divergent token and its near-tie classification."""

from __future__ import annotations

from typing import Any

import pytest

from testbed.config.correctness import Tolerance
from testbed.probes.correctness.cases import Case
from testbed.probes.correctness.diff import first_divergence
from testbed.probes.correctness.evaluators import (
    Settings,
    check_error,
    close,
    run_evaluator,
    twin_check,
)
from testbed.probes.correctness.outputs import ErrorOutput, Output

PARIS = Output(
    text=" Paris is big",
    completion_tokens=3,
    finish_reason="length",
    token_texts=[" Paris", " is", " big"],
    logprobs=[-0.2, -0.5, -1.0],
    top_logprobs=[
        [(" Paris", -0.2), (" the", -2.7)],
        [(" is", -0.5), (" was", -0.52)],
        [(" big", -1.0), (" large", -1.3)],
    ],
)


def case(**fields: Any) -> Case:
    return Case.model_validate({"name": "c", "request": {"prompt": "x"}, **fields})


async def judge(c: Case, actual: Output, settings: Settings | None = None) -> list[Any]:
    expected = c.expected_for("openai")
    return [
        await run_evaluator(e, expected, actual, settings or Settings(), greedy=True)
        for e in c.evaluators
    ]


def test_close_is_exact_on_strings_and_ints_and_tolerant_on_floats() -> None:
    assert close(-1.0, -1.0004, 5e-4, 5e-4)
    assert not close(-1.0, -1.002, 5e-4, 5e-4)
    assert not close(3, 4, 1.0, 1.0)  # integers are exact whatever the tolerance
    assert not close("a", "b", 1.0, 1.0)
    assert close([["a", -1.0]], [("a", -1.0001)], 5e-4, 5e-4)
    assert not close([1, 2], [1, 2, 3], 1.0, 1.0)
    assert not close(-1.0, -1.0004, None, None)  # exact: floats too
    assert not close(True, 1, 1.0, 1.0)


async def test_approx_passes_within_tolerance_and_exact_does_not() -> None:
    expected = PARIS.to_json()
    actual = Output.from_json({**expected, "logprobs": [-0.2001, -0.5, -1.0]})
    approx = case(expected=expected)
    assert all(c.passed for c in await judge(approx, actual))
    exact = case(expected=expected, evaluate=["exact"])
    (check,) = await judge(exact, actual)
    assert not check.passed
    assert "logprobs differs (first at [0]" in check.detail


async def test_wrong_text_fails_with_the_first_divergent_token() -> None:
    actual = Output.from_json(PARIS.to_json())
    actual.text, actual.token_texts = " Paris was big", [" Paris", " was", " big"]
    (check,) = await judge(case(expected=PARIS.to_json()), actual)
    assert not check.passed
    d = check.divergence
    assert d is not None
    assert d.unit == "token"
    assert d.index == 1
    assert (d.expected_token, d.actual_token) == (" is", " was")
    assert d.margin_nats == pytest.approx(0.02)
    assert d.near_tie is True
    assert d.common_prefix == " Paris"
    assert d.actual_continuation == " was big"


async def test_fields_restrict_the_comparison() -> None:
    actual = Output(text="other", finish_reason="length", completion_tokens=3)
    c = case(expected=PARIS.to_json(), evaluate=[{"approx": {"fields": ["finish_reason"]}}])
    assert all(check.passed for check in await judge(c, actual))


async def test_text_evaluators_combine() -> None:
    c = case(evaluate=[{"regex": r"^ Paris"}, {"contains": ["big", "small"]}, "json"])
    regex, contains, as_json = await judge(c, PARIS)
    assert regex.passed
    assert not contains.passed
    assert "small" in contains.detail
    assert not as_json.passed
    j = case(evaluate=[{"json": [1, 2]}])
    assert (await judge(j, Output(text=" [1, 2]")))[0].passed
    assert not (await judge(j, Output(text="[1, 3]")))[0].passed


async def test_similarity_uses_the_embedder() -> None:
    class Fake:
        async def similarity(self, a: str, b: str) -> float:
            return 0.9 if "Paris" in a and "Paris" in b else 0.1

    settings = Settings(embedder=Fake())  # type: ignore[arg-type]
    c = case(expected={"text": "Paris, France"}, evaluate=[{"similarity": 0.8}])
    assert (await judge(c, PARIS, settings))[0].passed
    (check,) = await judge(c, Output(text="bananas"), settings)
    assert not check.passed
    assert "0.1000 < 0.8" in check.detail


def test_error_expectations() -> None:
    c = case(error={"status": 400, "message": "maximum CONTEXT"})
    assert c.error is not None
    refused = Output(error=ErrorOutput(400, "This model's maximum context length is 8192"))
    assert check_error(c.error, refused).passed
    assert not check_error(c.error, Output(error=ErrorOutput(422, "maximum context"))).passed
    answered = check_error(c.error, PARIS)
    assert not answered.passed
    assert "got an answer" in answered.detail


def test_first_divergence_cases() -> None:
    same = Output.from_json(PARIS.to_json())
    assert first_divergence(PARIS, same, 0.05) is None
    shorter = Output(text=" Paris is", token_texts=[" Paris", " is"])
    d = first_divergence(PARIS, shorter, 0.05)
    assert d is not None
    assert d.index == 2
    assert d.actual_token is None
    plain = Output(text=" Paris was")  # no tokens: compared per character
    d = first_divergence(PARIS, plain, 0.05)
    assert d is not None
    assert d.unit == "char"
    assert d.index == 7
    assert d.near_tie is None
    far = Output(text=" the", token_texts=[" the"])
    d = first_divergence(PARIS, far, 0.05)
    assert d is not None
    assert d.margin_nats == pytest.approx(2.5)
    assert d.near_tie is False
    d = first_divergence(PARIS, far, 0.05, greedy=False)
    assert d is not None
    assert d.near_tie is None


def test_margin_when_the_other_token_is_not_listed_is_a_lower_bound() -> None:
    other = Output(text=" Rome", token_texts=[" Rome"], top_logprobs=[[(" Rome", -0.1)]])
    d = first_divergence(PARIS, other, 0.05)
    assert d is not None
    assert d.margin_expected == pytest.approx(2.5)
    assert d.margin_actual is None
    assert d.near_tie is False


def test_twin_must_equal_unary() -> None:
    settings = Settings(tolerance=Tolerance(rel=5e-4, abs=5e-4))
    merged = Output.from_json(PARIS.to_json())
    assert twin_check(PARIS, merged, settings, greedy=True).passed
    merged.completion_tokens = 4
    check = twin_check(PARIS, merged, settings, greedy=True)
    assert not check.passed
    assert "completion_tokens" in check.detail
    refused = Output(error=ErrorOutput(400, "no"))
    assert twin_check(refused, Output(error=ErrorOutput(400, "no!")), settings, greedy=True).passed
    assert not twin_check(refused, PARIS, settings, greedy=True).passed
