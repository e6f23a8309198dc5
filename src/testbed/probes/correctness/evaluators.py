"""Evaluators: does an answer match what a case expects?

- ``exact``: every expected field equal, floats included;
- ``approx``: strings and integers exact, floats within a relative or absolute tolerance
  (default TGIS's own 5e-4 — tight, unlike tgis-tester's 5.0);
- ``regex``, ``contains``, ``json`` on the text; ``similarity``: cosine similarity of
  sentence embeddings at least a threshold.

A case's evaluators combine: each gives a :class:`Check`, and the case passes when all do.
A failed text comparison carries the first divergent token (:mod:`diff`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from testbed.config.correctness import Tolerance
from testbed.probes.correctness.cases import (
    ApproxEval,
    ContainsEval,
    Evaluator,
    ExactEval,
    Expected,
    ExpectedError,
    JsonEval,
    RegexEval,
    SimilarityEval,
)
from testbed.probes.correctness.diff import FirstDivergence, first_divergence
from testbed.probes.correctness.embedding import Embedder
from testbed.probes.correctness.outputs import COMPARED_FIELDS, Output


@dataclass
class Check:
    """One evaluator's judgement of one answer."""

    evaluator: str
    passed: bool
    detail: str = ""
    expected: Any = None
    actual: Any = None
    divergence: FirstDivergence | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"evaluator": self.evaluator, "passed": self.passed}
        if not self.passed:
            out |= {"detail": self.detail, "expected": self.expected, "actual": self.actual}
            if self.divergence is not None:
                out["first_divergence"] = self.divergence.to_json()
        return out


@dataclass
class Settings:
    """What evaluation needs beyond the case: defaults and the embedding model."""

    tolerance: Tolerance = field(default_factory=Tolerance)
    near_tie_nats: float = 0.05
    similarity_threshold: float = 0.8
    embedder: Embedder | None = None


def close(expected: Any, actual: Any, rel: float | None, abs_: float | None) -> bool:
    """Equal, with floats within tolerance (``rel is None``: floats exact too)."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return expected is actual
    if isinstance(expected, int | float) and isinstance(actual, int | float):
        if isinstance(expected, int) and isinstance(actual, int):
            return expected == actual
        if rel is None:
            return float(expected) == float(actual)
        return math.isclose(expected, actual, rel_tol=rel, abs_tol=abs_ or 0.0)
    if isinstance(expected, list | tuple) and isinstance(actual, list | tuple):
        return len(expected) == len(actual) and all(
            close(e, a, rel, abs_) for e, a in zip(expected, actual, strict=True)
        )
    if isinstance(expected, dict) and isinstance(actual, dict):
        return expected.keys() == actual.keys() and all(
            close(v, actual[k], rel, abs_) for k, v in expected.items()
        )
    return bool(expected == actual)


def _first_bad(
    expected: Sequence[Any], actual: Sequence[Any], rel: float | None, abs_: float | None
) -> str:
    """Where two lists first differ, for the message."""
    for i, (e, a) in enumerate(zip(expected, actual, strict=False)):
        if not close(e, a, rel, abs_):
            return f" (first at [{i}]: {e!r} vs {a!r})"
    return f" (lengths {len(expected)} vs {len(actual)})"


def compare_fields(
    expected: dict[str, Any],
    actual: Output,
    rel: float | None,
    abs_: float | None,
    near_tie_nats: float,
    *,
    greedy: bool = True,
    name: str = "approx",
) -> Check:
    """Compare every field of ``expected`` with ``actual`` (the heart of exact and approx)."""
    wrong_e: dict[str, Any] = {}
    wrong_a: dict[str, Any] = {}
    notes = []
    answer = actual.to_json()
    for key, value in expected.items():
        got = answer.get(key)
        if close(value, got, rel, abs_):
            continue
        wrong_e[key], wrong_a[key] = value, got
        where = ""
        if isinstance(value, list) and isinstance(got, list):
            where = _first_bad(value, got, rel, abs_)
        notes.append(f"{key} differs{where}")
    if not wrong_e:
        return Check(name, True)
    divergence = None
    if "text" in wrong_e or "token_texts" in wrong_e:
        reference = Output.from_json(expected)
        divergence = first_divergence(reference, actual, near_tie_nats, greedy=greedy)
    return Check(name, False, "; ".join(notes), wrong_e, wrong_a, divergence)


def expected_fields(expected: Expected, only: list[str] | None) -> dict[str, Any]:
    data = expected.model_dump(exclude_none=True)
    if "top_logprobs" in data:
        data["top_logprobs"] = [[list(p) for p in row] for row in data["top_logprobs"]]
    return {k: v for k, v in data.items() if only is None or k in only}


def check_error(expected: ExpectedError, actual: Output) -> Check:
    """The server must have refused the request as ``expected`` says."""
    want = expected.model_dump(exclude_none=True)
    if actual.error is None:
        return Check("error", False, "expected an error, got an answer", want, actual.text)
    got = {"status": actual.error.status, "message": actual.error.message}
    problems = []
    if expected.status is not None and expected.status != actual.error.status:
        problems.append(f"status {actual.error.status}, expected {expected.status}")
    message = actual.error.message
    if expected.message is not None and expected.message.lower() not in message.lower():
        problems.append(f"message does not contain {expected.message!r}")
    if expected.match is not None and not re.search(expected.match, message):
        problems.append(f"message does not match /{expected.match}/")
    return Check("error", not problems, "; ".join(problems), want, got)


async def run_evaluator(
    evaluator: Evaluator,
    expected: Expected | None,
    actual: Output,
    settings: Settings,
    *,
    greedy: bool,
) -> Check:
    """One evaluator on one answer."""
    text = actual.text
    if isinstance(evaluator, ExactEval | ApproxEval):
        if expected is None:
            return Check(evaluator.kind, False, "no expected answer for this protocol — record it")
        fields = expected_fields(expected, evaluator.fields)
        if isinstance(evaluator, ExactEval):
            rel, abs_ = None, None
        else:
            rel = evaluator.rel if evaluator.rel is not None else settings.tolerance.rel
            abs_ = evaluator.abs if evaluator.abs is not None else settings.tolerance.abs
        return compare_fields(
            fields, actual, rel, abs_, settings.near_tie_nats, greedy=greedy, name=evaluator.kind
        )
    if isinstance(evaluator, RegexEval):
        match = (re.fullmatch if evaluator.fullmatch else re.search)(evaluator.pattern, text)
        return Check(
            "regex",
            match is not None,
            f"no match for /{evaluator.pattern}/",
            evaluator.pattern,
            text,
        )
    if isinstance(evaluator, ContainsEval):
        fold = str.lower if evaluator.ignore_case else str
        missing = [t for t in evaluator.text if fold(t) not in fold(text)]
        return Check("contains", not missing, f"missing {missing}", evaluator.text, text)
    if isinstance(evaluator, JsonEval):
        return _check_json(evaluator, text)
    assert isinstance(evaluator, SimilarityEval)
    return await _check_similarity(evaluator, expected, text, settings)


def _check_json(evaluator: JsonEval, text: str) -> Check:
    try:
        value = json.loads(text)
    except ValueError as exc:
        return Check("json", False, f"not valid JSON: {exc}", None, text)
    if evaluator.equals is not None and value != evaluator.equals:
        return Check("json", False, "parsed JSON differs", evaluator.equals, value)
    return Check("json", True)


async def _check_similarity(
    evaluator: SimilarityEval, expected: Expected | None, text: str, settings: Settings
) -> Check:
    target = evaluator.to if evaluator.to is not None else (expected.text if expected else None)
    if target is None:
        return Check("similarity", False, "no text to compare with: give `to:` or record one")
    threshold = evaluator.threshold
    if threshold is None:
        threshold = settings.similarity_threshold
    embedder = settings.embedder or Embedder()
    score = await embedder.similarity(target, text)
    if score >= threshold:
        return Check("similarity", True, f"cosine similarity {score:.4f}")
    return Check("similarity", False, f"cosine similarity {score:.4f} < {threshold}", target, text)


def twin_check(unary: Output, merged: Output, settings: Settings, *, greedy: bool) -> Check:
    """The streamed answer, merged, must equal the unary one (fields the unary answer has)."""
    if unary.error is not None or merged.error is not None:
        same = unary.error and merged.error and unary.error.status == merged.error.status
        unary_e = unary.error.status if unary.error else None
        merged_e = merged.error.status if merged.error else None
        return Check(
            "stream=unary",
            bool(same),
            "one refused, the other did not (or another status)",
            unary_e,
            merged_e,
        )
    reference = {k: v for k, v in unary.to_json().items() if k in COMPARED_FIELDS}
    tol = settings.tolerance
    return compare_fields(
        reference,
        merged,
        tol.rel,
        tol.abs,
        settings.near_tie_nats,
        greedy=greedy,
        name="stream=unary",
    )
