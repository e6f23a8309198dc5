"""``testbed record``: from a campaign's reference deployment, or from a running server."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest
import yaml

from testbed.cli import main
from testbed.config.sim import SimParams
from testbed.servers.sim import serve_in_thread

EXAMPLES = Path(__file__).parents[3] / "examples"


def test_record_from_the_campaign_reference_reproduces_the_sim_goldens(tmp_path: Path) -> None:
    out = tmp_path / "sim.yaml"
    assert main(["record", str(EXAMPLES / "sim-correctness.yaml"), "--out", str(out)]) == 0
    shipped = yaml.safe_load((EXAMPLES / "cases" / "sim.yaml").read_text())
    again = yaml.safe_load(out.read_text())
    assert again == shipped
    assert "# Recorded by testbed record from sim (sim, sim-model)" in out.read_text()


def test_record_a_case_file_from_a_url(tmp_path: Path) -> None:
    cases = tmp_path / "cases.yaml"
    cases.write_text(
        textwrap.dedent(
            """\
            - name: hi
              request: {prompt: "hi there", max_new_tokens: 3, logprobs: 1}
            """
        )
    )
    with serve_in_thread(SimParams(seed=0)) as url:
        assert main(["record", str(cases), "--url", url, "--protocol", "tgi"]) == 0
    (case,) = yaml.safe_load(cases.read_text())
    assert case["expected"]["completion_tokens"] == 3
    assert case["expected"]["finish_reason"] == "length"  # TGI's name, from /generate
    assert len(case["expected"]["text"].split()) == 3


def test_record_needs_a_server_or_a_reference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = tmp_path / "cases.yaml"
    shutil.copy(EXAMPLES / "cases" / "sim.yaml", cases)
    assert main(["record", str(cases)]) == 2
    assert "give --url" in capsys.readouterr().err
    campaign = tmp_path / "two.yaml"
    campaign.write_text(
        textwrap.dedent(
            f"""\
            name: two
            deployments:
              - {{name: a, server: sim}}
              - {{name: b, server: sim}}
            correctness: {{cases: [{cases}]}}
            """
        )
    )
    assert main(["record", str(campaign)]) == 2
    assert "which deployment is the reference" in capsys.readouterr().err
