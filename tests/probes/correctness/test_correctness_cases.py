"""Case files: the format, its shorthands, and file:line errors for mistakes."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.core.errors import CampaignError
from testbed.probes.correctness.cases import (
    ApproxEval,
    ByProtocol,
    ContainsEval,
    ShardRule,
    SimilarityEval,
    WhenRule,
    load_case_file,
    load_case_files,
)

EXAMPLES = Path(__file__).parents[3] / "examples" / "cases"


def write(tmp_path: Path, text: str, name: str = "cases.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_shorthands_are_read(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
- name: a
  request: {prompt: hi, max_new_tokens: 3, stop: "\\n"}
  expected: {text: " yo"}
  evaluate: [approx, {contains: yo}, {similarity: 0.9}]
  skip: [single_shard_only, {when: {dtype: [bfloat16, float16]}}]
""",
    )
    (case,) = load_case_file(path).cases
    assert case.request.stop == ["\n"]
    assert isinstance(case.evaluators[0], ApproxEval)
    assert isinstance(case.evaluators[1], ContainsEval)
    assert case.evaluators[1].text == ["yo"]
    assert isinstance(case.evaluators[2], SimilarityEval)
    assert case.evaluators[2].threshold == 0.9
    assert isinstance(case.skip[0], ShardRule)
    assert isinstance(case.skip[1], WhenRule)
    assert case.expected_for("tgi") is not None
    assert case.expected_for("tgi").text == " yo"


def test_expected_by_protocol(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
cases:
  - name: a
    protocol: both
    request: {prompt: hi}
    expected: {openai: {finish_reason: stop}, tgi: {finish_reason: stop_sequence}}
""",
    )
    (case,) = load_case_file(path).cases
    assert isinstance(case.expected, ByProtocol)
    assert case.expected_for("openai").finish_reason == "stop"  # type: ignore[union-attr]
    assert case.expected_for("tgi").finish_reason == "stop_sequence"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("- name: a\n  request: {prompt: hi, max_tokens: 3}\n", "cases.yaml:2"),
        (
            "- name: a\n  request: {prompt: hi}\n  expected: {text: x}\n  error: {status: 400}\n",
            "expected: or error:, not both",
        ),
        (
            "- name: a\n  protocol: tgi\n  request: {messages: [{role: user, content: x}]}\n",
            "needs the OpenAI protocol",
        ),
        ("- name: a\n  request: {prompt: hi, temperature: 0.7}\n", "add seed: N"),
        ("- name: a\n  request: {prompt: hi, messages: []}\n", "exactly one of prompt"),
        (
            "- name: a\n  request: {prompt: hi}\n- name: a\n  request: {prompt: ho}\n",
            "cases.yaml:3:3: case name 'a' is repeated",
        ),
        ("- name: a\n  request: {prompt: hi}\n  evaluate: [approxx]\n", "approxx"),
        ("name: a\n", "a case file is a list"),
    ],
)
def test_mistakes_name_the_place_and_the_fix(tmp_path: Path, text: str, fragment: str) -> None:
    with pytest.raises(CampaignError) as info:
        load_case_file(write(tmp_path, text))
    assert fragment in str(info.value)


def test_missing_expected_only_when_required(tmp_path: Path) -> None:
    path = write(tmp_path, "- name: a\n  request: {prompt: hi}\n")
    assert load_case_file(path).cases[0].needs_expected()
    with pytest.raises(CampaignError, match="testbed record"):
        load_case_file(path, require_expected=True)
    regex_only = write(tmp_path, "- name: b\n  request: {prompt: hi}\n  evaluate: {regex: x}\n")
    load_case_file(regex_only, require_expected=True)


def test_names_unique_across_files(tmp_path: Path) -> None:
    one = write(tmp_path, "- name: a\n  request: {prompt: hi}\n", "one.yaml")
    two = write(tmp_path, "- name: a\n  request: {prompt: ho}\n", "two.yaml")
    with pytest.raises(CampaignError, match="also in"):
        load_case_files([one, two])


def test_shipped_examples_load_with_answers() -> None:
    for path in sorted(EXAMPLES.glob("*.yaml")):
        load_case_file(path, require_expected=False)
    cases = {c.name: c for c in load_case_file(EXAMPLES / "smollm2.yaml").cases}
    assert 10 <= len(cases) <= 20
    assert cases["capital-of-france"].expected_for("openai") is not None
    assert cases["too-many-tokens"].error is not None
