"""Several models in one campaign (tgis-tester's test specs: model + configs + cases): each
correctness suite's deployments run its own case files against its own reference, and the
plan shows each configuration's case count after its skip rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed.cli import main
from testbed.config.correctness import CorrectnessProbe
from testbed.config.loader import load_campaign
from testbed.core.errors import CampaignError
from testbed.execution.case_counts import case_counts
from testbed.plan.expand import expand

EXAMPLES = Path(__file__).parents[2] / "examples"


def sim(name: str, **params: Any) -> dict[str, Any]:
    return {"name": name, "server": "sim", "params": {"seed": 0, **params}}


def campaign(tmp_path: Path, correctness: dict[str, Any]) -> Path:
    (tmp_path / "a.yaml").write_text(
        "- {name: a1, request: {prompt: Hi, max_new_tokens: 2}, error: {status: 400}}\n"
        "- {name: a2, request: {prompt: Hi, max_new_tokens: 2}, error: {status: 400},"
        " skip: [{when: {max_model_len: 64}, reason: short}]}\n"
    )
    (tmp_path / "b.yaml").write_text(
        "- {name: b1, request: {prompt: Yo, max_new_tokens: 2}, error: {status: 400}}\n"
    )
    data = {
        "name": "suites",
        "deployments": [sim("a-one"), sim("a-two", max_model_len=64), sim("b-one")],
        "correctness": correctness,
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


SUITES = {
    "concurrency": 2,
    "suites": [
        {"deployments": ["a-one", "a-two"], "cases": ["a.yaml"], "reference": "a-one"},
        {"deployments": ["b-one"], "cases": ["b.yaml"]},
    ],
}


def test_each_suite_plans_its_own_cases_reference_and_deployments(tmp_path: Path) -> None:
    loaded = load_campaign(str(campaign(tmp_path, SUITES)))
    plan = expand(loaded)
    by_deployment = {
        plan.workers[t.workers[0]].deployment: plan.probe_configs[t.probe_key]
        for t in plan.treatments
    }
    assert sorted(by_deployment) == ["a-one", "a-two", "b-one"]  # one treatment each
    suites = {name: c for name, c in by_deployment.items() if isinstance(c, CorrectnessProbe)}
    assert suites == by_deployment  # each suite's section is a correctness model
    assert suites["a-one"].cases == ["a.yaml"]
    assert suites["a-two"].reference == "a-one"
    assert suites["b-one"].cases == ["b.yaml"]
    assert suites["b-one"].reference is None
    assert {c.concurrency for c in suites.values()} == {2}  # shared settings
    assert all(not c.suites for c in suites.values())
    counts = {
        plan.workers[t.workers[0]].deployment: count
        for t in plan.treatments
        if (count := case_counts(loaded, plan).get(t.id))
    }
    assert counts == {"a-one": (2, 2), "a-two": (1, 2), "b-one": (1, 1)}  # a2 skipped on a-two


@pytest.mark.parametrize(
    ("correctness", "message"),
    [
        ({**SUITES, "cases": ["a.yaml"]}, "with suites, cases go in each suite"),
        ({**SUITES, "reference": "a-one"}, "with suites, reference go in each suite"),
        ({"concurrency": 2}, "give case files in cases:"),
        (
            {"suites": [{"deployments": ["a-one"], "cases": ["a.yaml"], "reference": "b-one"}]},
            "reference 'b-one' is not one of this suite's deployments",
        ),
        (
            {"suites": [{"deployments": ["nope"], "cases": ["a.yaml"]}]},
            "'nope' is not a deployment; known: a-one, a-two, b-one",
        ),
    ],
)
def test_suite_mistakes_are_refused_naming_the_fix(
    tmp_path: Path, correctness: dict[str, Any], message: str
) -> None:
    with pytest.raises(CampaignError, match=message):
        load_campaign(str(campaign(tmp_path, correctness)))


def test_a_tgis_suite_needs_deployments_that_serve_tgis(tmp_path: Path) -> None:
    path = campaign(tmp_path, {**SUITES, "protocol": "tgis"})
    with pytest.raises(
        CampaignError, match=r"correctness\.protocol: tgis needs tgis, but deployment 'a-one'"
    ):
        load_campaign(str(path))


def test_plan_shows_case_counts_after_skips(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = campaign(tmp_path, SUITES)
    assert main(["plan", str(path), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert sorted((c["run"], c["total"]) for c in document["case_counts"].values()) == [
        (1, 1), (1, 2), (2, 2)
    ]  # fmt: skip
    assert main(["plan", str(path)]) == 0
    assert "1 (1 skipped)" in capsys.readouterr().out


def test_the_example_has_one_suite_per_model() -> None:
    loaded = load_campaign(EXAMPLES / "tgis-correctness.yaml")
    plan = expand(loaded)
    sections = {
        plan.workers[t.workers[0]].deployment: plan.probe_configs[t.probe_key]
        for t in plan.treatments
    }
    references = {n: c.reference for n, c in sections.items() if isinstance(c, CorrectnessProbe)}
    assert references == {
        "fp32-threads1": "fp32-threads1", "fp32-batch1": "fp32-threads1",
        "bf16": "fp32-threads1", "t5-fp32": "t5-fp32", "t5-batch1": "t5-fp32",
    }  # fmt: skip
