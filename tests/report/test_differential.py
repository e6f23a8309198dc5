"""The report's cross-configuration differential: with correctness.reference set, another
deployment's answers are diffed against the reference's, first divergence highlighted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from testbed.report.run_summary import PublishOptions, publish
from testbed.results.files import write_json
from tests.report.fake_runs import make_run


def case(name: str, tokens: list[str], top: list[Any] | None = None) -> dict[str, Any]:
    output: dict[str, Any] = {
        "text": "".join(tokens),
        "token_texts": tokens,
        "completion_tokens": len(tokens),
    }
    if top is not None:
        output["top_logprobs"] = top
    return {
        "kind": "case",
        "case": name,
        "protocol": "openai",
        "stream": False,
        "greedy": True,
        "status": "PASS",
        "output": output,
    }


def add_correctness(run: Path) -> None:
    plan = json.loads((run / "plan.json").read_text())
    plan["workers"] += [
        {
            "id": "wr",
            "deployment": "ref",
            "server": "sim",
            "params": {},
            "settings": {},
            "config": {},
        },
        {
            "id": "wo",
            "deployment": "other",
            "server": "sim",
            "params": {},
            "settings": {},
            "config": {},
        },
    ]
    records = {
        "wr": [
            case("same", [" a", " b"]),
            case("capital", [" Paris", "."], [[[" Paris", -0.1], [" Lyon", -3.0]], [[".", -0.1]]]),
        ],
        "wo": [
            case("same", [" a", " b"]),
            case("capital", [" Lyon", "."], [[[" Lyon", -0.2], [" Paris", -2.5]], [[".", -0.1]]]),
        ],
    }
    for number, worker in enumerate(("wr", "wo"), start=len(plan["treatments"]) + 1):
        tid = f"cc{worker}000000"
        dirname = f"{number:03d}__{worker}-cases__{tid}"
        (run / dirname).mkdir()
        (run / dirname / "records.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in records[worker])
        )
        write_json(
            run / dirname / "summary.json",
            {
                "id": tid,
                "probe": "correctness",
                "params": {},
                "verdict": {"status": "PASS", "reason": "2 passed"},
                "cases": {"total": 2, "passed": 2},
            },
        )
        plan["treatments"].append(
            {
                "index": number,
                "id": tid,
                "dir": dirname,
                "slug": "x",
                "probe": "correctness",
                "worker": worker,
                "workers": [worker],
                "status": "planned",
                "reason": "",
                "params": {},
                "config": {"cases": ["cases.yaml"], "reference": "ref", "near_tie_nats": 0.05},
            }
        )
    write_json(run / "plan.json", plan)
    campaign = yaml.safe_load((run / "campaign.resolved.yaml").read_text())
    campaign["correctness"] = {"cases": ["cases.yaml"], "reference": "ref", "near_tie_nats": 0.05}
    (run / "campaign.resolved.yaml").write_text(yaml.safe_dump(campaign))


def test_differential_against_the_reference(tmp_path: Path) -> None:
    run = make_run(tmp_path, "r1", levels=(1,))
    add_correctness(run)
    publish(run, Console(quiet=True), PublishOptions(use_index=False))
    page = (run / "report.html").read_text()
    assert "003__wo-cases__ccwo000000 against the reference 002__wr-cases__ccwr000000" in page
    assert '<mark class="expected"> Paris</mark>' in page  # the reference side
    assert '<mark class="actual"> Lyon</mark>' in page
    assert "capital · openai · different" in page
