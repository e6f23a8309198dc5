"""Embeddings cases in case files (issue 37): goldens inline, in .npy or .json files beside
the case file; every mistake in one is exit 2 at the case's line, with the fix; a campaign
that sends them to a server without /v1/embeddings (hf, tgi) is refused at validation."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from testbed.cli import main
from testbed.config.loader import load_campaign
from testbed.core.errors import CampaignError
from testbed.execution.case_counts import case_counts
from testbed.plan.expand import expand
from testbed.probes.correctness.cases import load_case_file
from testbed.probes.correctness.embedding_cases import CosineEval, RankingEval


def write(folder: Path, text: str) -> Path:
    path = folder / "cases.yaml"
    path.write_text(text)
    return path


def test_goldens_are_read_inline_and_from_npy_and_json_files(tmp_path: Path) -> None:
    (tmp_path / "g").mkdir()
    np.save(tmp_path / "g" / "one.npy", np.array([0.0, 3.0, 4.0], dtype=np.float32))
    np.save(tmp_path / "g" / "two.npy", np.array([[1.0, 0.0], [0.0, 2.0]], dtype=np.float32))
    (tmp_path / "g" / "two.json").write_text(json.dumps([[1, 2], [3, 4]]))
    path = write(
        tmp_path,
        """
- {name: inline, api: embeddings, request: {input: a}, expected: {embedding: [1, 2]}}
- name: inline-batch
  api: embeddings
  request: {input: [a, b, c]}
  expected: {embedding: [[1, 2], [3, 4.5], [5, 6]]}
  evaluate: [{cosine: 0.999}, {ranking: {anchor: 0, closer: 1, than: 2}}]
- {name: one-npy, api: embeddings, request: {input: a}, expected: {embedding: g/one.npy}}
- {name: two-npy, api: embeddings, request: {input: [a, b]}, expected: {embedding: g/two.npy}}
- name: two-json
  api: embeddings
  request: {input: [a, b], dimensions: 2}
  expected: {embedding: g/two.json}
- {name: text, request: {prompt: hi}, evaluate: [{regex: .}]}
""",
    )
    loaded = load_case_file(path)
    assert [c.name for c in loaded.cases] == ["text"]
    assert [c.name for c in loaded.embedding_cases] == [
        "inline", "inline-batch", "one-npy", "two-npy", "two-json",
    ]  # fmt: skip
    assert loaded.goldens == {
        "inline": [[1.0, 2.0]],
        "inline-batch": [[1.0, 2.0], [3.0, 4.5], [5.0, 6.0]],
        "one-npy": [[0.0, 3.0, 4.0]],
        "two-npy": [[1.0, 0.0], [0.0, 2.0]],
        "two-json": [[1.0, 2.0], [3.0, 4.0]],
    }
    batch = loaded.embedding_cases[1]
    assert batch.evaluators == [
        CosineEval(kind="cosine", threshold=0.999),
        RankingEval(kind="ranking", anchor=0, closer=1, than=2),
    ]
    assert loaded.embedding_cases[0].evaluators == [CosineEval(kind="cosine", threshold=0.99)]
    assert loaded.places["two-json"] == f"{path}:10:3"


MISTAKES = [
    pytest.param(
        "expected: {embedding: g/none.json}",
        "expected.embedding: no golden file g/none.json (relative to the case file) — record it"
        " with `testbed record`",
        id="missing-file",
    ),
    pytest.param(
        "expected: {embedding: g/vec.txt}",
        "expected.embedding: g/vec.txt is neither .npy nor .json",
        id="unknown-format",
    ),
    pytest.param(
        "expected: {embedding: [1, 2]}\n  request: {input: [a, b]}",
        "expected.embedding holds 1 vector(s) for 2 input(s)",
        id="count",
    ),
    pytest.param(
        "expected: {embedding: [1, 2, 3]}\n  request: {input: a, dimensions: 4}",
        "expected.embedding vectors have 3 dimensions, but request.dimensions asks for 4",
        id="dimensions",
    ),
    pytest.param("expected: {embedding: [0, 0]}", "expected.embedding[0] is all zeros", id="zero"),
    pytest.param(
        "expected: {embedding: g/nan.npy}",
        "expected.embedding holds a number that is not finite",
        id="nan",
    ),
    pytest.param(
        "expected: {embedding: g/words.json}",
        "expected.embedding is not a vector of numbers or a list of equally long vectors",
        id="not-numbers",
    ),
    pytest.param(
        "expected: {embedding: g/cube.npy}", "expected.embedding has shape [1, 1, 2]", id="3-d"
    ),
]


@pytest.mark.parametrize(("fields", "message"), MISTAKES)
def test_a_bad_golden_is_exit_2_at_the_case_line(tmp_path: Path, fields: str, message: str) -> None:
    (tmp_path / "g").mkdir()
    np.save(tmp_path / "g" / "nan.npy", np.array([1.0, np.nan]))
    np.save(tmp_path / "g" / "cube.npy", np.ones((1, 1, 2)))
    (tmp_path / "g" / "words.json").write_text('["a", "b"]')
    (tmp_path / "g" / "vec.txt").write_text("[1, 2]")
    request = "" if "request:" in fields else "\n  request: {input: a}"
    path = write(tmp_path, f"# golden\n- name: bad\n  api: embeddings{request}\n  {fields}\n")
    with pytest.raises(CampaignError) as info:
        load_case_file(path)
    assert str(info.value).startswith(f"{path}:2:3: case 'bad': {message}"), str(info.value)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ("evaluate: [approx]", "'approx' is not allowed; expected one of cosine, ranking"),
        (
            "evaluate: [{ranking: {anchor: 0, closer: 1, than: 3}}]",
            "ranking {anchor: 0, closer: 1, than: 3} needs three different indices of"
            " request.input (0..2)",
        ),
        (
            "evaluate: [{ranking: {anchor: 0, closer: 0, than: 1}}]",
            "needs three different indices",
        ),
        ("protocol: tgi", "protocol: 'tgi' is not allowed; expected one of openai"),
        ("request: {prompt: hi}", "request.input: required field is missing"),
        ("expected: {text: hi}", "expected.embedding: required field is missing"),
    ],
)
def test_an_embeddings_case_says_only_what_embeddings_have(
    tmp_path: Path, fields: str, message: str
) -> None:
    request = "" if fields.startswith("request") else "\n  request: {input: [a, b, c]}"
    path = write(tmp_path, f"- name: bad\n  api: embeddings{request}\n  {fields}\n")
    with pytest.raises(CampaignError, match="cases") as info:
        load_case_file(path)
    assert message in str(info.value), str(info.value)
    assert f"{path}:" in str(info.value)


def test_an_unknown_api_is_refused_and_generation_cases_are_as_before(tmp_path: Path) -> None:
    path = write(tmp_path, "- {name: a, api: rerank, request: {prompt: hi}}\n")
    with pytest.raises(CampaignError, match=r"cases\[0\]\.api: unknown field"):
        load_case_file(path)


def test_names_are_unique_across_both_kinds(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "- {name: a, request: {prompt: hi}, evaluate: [json]}\n"
        "- {name: a, api: embeddings, request: {input: x}, evaluate: []}\n",
    )
    with pytest.raises(CampaignError, match="case name 'a' is repeated"):
        load_case_file(path)


CASES = """\
- {name: text, request: {prompt: hi, max_new_tokens: 2}, evaluate: [{regex: .}]}
- name: vector
  api: embeddings
  request: {input: [a, a, b]}
  evaluate: [{ranking: {anchor: 0, closer: 1, than: 2}}]
"""


def campaign(tmp_path: Path, deployment: dict[str, object], protocol: str = "openai") -> Path:
    (tmp_path / "cases.yaml").write_text(CASES)
    data = {
        "name": "embeddings",
        "deployments": [deployment],
        "correctness": {"cases": ["cases.yaml"], "protocol": protocol},
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.parametrize(
    ("deployment", "protocol", "why"),
    [
        (
            {"name": "ref", "server": "hf", "model": "bundled:smollm2-135m"},
            "openai",
            "deployment 'ref' (hf) serves /v1/completions and /v1/chat/completions only, not"
            " /v1/embeddings",
        ),
        (
            {"name": "grpc", "server": "external", "url": "http://h:1", "protocol": "tgis",
             "grpc": "h:2"},
            "tgis",  # the text cases go over TGIS's gRPC; the embeddings case cannot
            "deployment 'grpc' (external) serves only tgis, not OpenAI's /v1/embeddings",
        ),
    ],
)  # fmt: skip
def test_a_server_without_embeddings_is_refused_at_validation(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    deployment: dict[str, object],
    protocol: str,
    why: str,
) -> None:
    code = main(["validate", str(campaign(tmp_path, deployment, protocol))])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"{tmp_path / 'cases.yaml'}:2:3: case 'vector' is an embeddings case" in err
    assert why in err
    assert f"leave '{deployment['name']}' out of correctness.deployments" in err


def test_the_simulator_serves_them_and_the_plan_counts_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = campaign(tmp_path, {"name": "sim", "server": "sim"})
    assert main(["validate", str(path)]) == 0, capsys.readouterr().err
    loaded = load_campaign(str(path))
    plan = expand(loaded)
    assert list(case_counts(loaded, plan).values()) == [(2, 2)]
