"""``testbed load --stages`` and a campaign's ``load.stages``: several rates in a row run from
the flag; a bad stage list is refused before anything runs (exit 2, file:line, the fix)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed.cli import main
from testbed.servers.sim.child import sim_process


@pytest.fixture(scope="module")
def sim() -> Iterator[str]:
    with sim_process() as url:
        yield url


def test_stages_from_the_flag(sim: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    flags = ["--stages", "20:0.5,40:12r", "--arrival", "constant", "--input-tokens", "4"]
    code = main(["load", sim, *flags, "--output-tokens", "2", "--no-plots", "--out", str(out)])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["profile"] == "rate"
    first, second = summary["stages"]
    assert (first["stage"], first["load"]["rate"]) == ("rate-20", 20)
    assert (second["stage"], second["requests"]["total"]) == ("rate-40", 12)
    printed = capsys.readouterr().out
    assert "rate-20" in printed
    assert "rate-40" in printed


@pytest.mark.parametrize(
    "flags",
    [
        ["--stages", "2:5", "--rate", "3"],
        ["--stages", "2:5", "--profile", "sweep"],
        ["--stages", "2:5,2:9"],
        ["--stages", "fast:5"],
    ],
)
def test_bad_stage_flags(sim: str, tmp_path: Path, flags: list[str]) -> None:
    out = tmp_path / "out"
    assert main(["load", sim, *flags, "--out", str(out)]) == 2
    assert not out.exists()


CAMPAIGN = """\
name: stages
deployments:
  - name: sim
    server: sim
load:
  warmup_s: 2
  stages:
    - {rate: 2, duration_s: 50}
    - {rate: 5, duration_s: 2}
"""


def test_a_campaign_stage_too_short_for_its_warmup(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(CAMPAIGN)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:8:" in err  # where the stage list starts
    assert "stages[1] (rate-5)" in err
    assert "must be shorter than its duration_s (2)" in err


def test_a_fraction_rate_names_its_stage_without_a_dot(tmp_path: Path) -> None:
    """Stage names are one part of dotted metric names: criteria can name a stage's."""
    path = tmp_path / "c.yaml"
    path.write_text(
        CAMPAIGN.replace("{rate: 5, duration_s: 2}", "{rate: 2.5, duration_s: 50}")
        + "matrix: {factors: {load.seed: [1, 2]}}\n"
        "criteria:\n  - name: x\n    metric: stages.rate-2_5.ttft_ms.p50\n"
        "    baseline: {load.seed: 1}\n    candidates: [{load.seed: 2}]\n"
    )
    from testbed.config.load import LoadProbe
    from testbed.config.loader import load_campaign
    from testbed.plan.expand import expand
    from testbed.probes.load import profiles

    plan = expand(load_campaign(path))
    (section, *_) = (c for key, c in plan.probe_configs.items() if key.startswith("load:"))
    assert isinstance(section, LoadProbe)  # the plan's section, as the probe gets it
    stages = profiles.first_stages(section)
    assert [s.name for s in stages] == ["rate-2", "rate-2_5"]


def test_the_html_report_has_a_row_per_stage(sim: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    flags = ["--stages", "20:0.5,40:0.5", "--arrival", "constant", "--input-tokens", "4"]
    assert main(["load", sim, *flags, "--output-tokens", "2", "--no-plots", "--out", str(out)]) == 0
    assert main(["report", str(out)]) == 0
    page = (out / "report.html").read_text()
    assert "<th>rate achieved</th>" in page
    assert "<tr><td>rate-20</td><td>20.00</td>" in page
    assert "<tr><td>rate-40</td><td>40.00</td>" in page
    assert "Stages: latency vs rate" in page
