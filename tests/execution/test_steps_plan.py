"""Steps planned from a campaign: numbering in execution order, templates from the resolved
campaign (vars changed by presets and --set), TOPSAIL's named commands (prefix/suffix,
extra, SET_AT_RUNTIME), and every mistake refused at validation with file:line (exit 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from testbed.config.loader import load_campaign
from testbed.core.errors import CampaignError
from testbed.execution.pipeline import check_inputs
from testbed.execution.steps import planned_steps

SRC = Path(__file__).resolve().parents[2] / "src"

HEAD = """\
name: steps
deployments: [{name: stable, server: sim, params: {ttft_ms: 3}}]
load: {requests: 4, dataset: {kind: synthetic, input_tokens: 8, output_tokens: 4}}
vars: {pool: a100, token: "${env:H21_TOKEN}"}
"""

STEPS = """\
steps:
  cleanup:
    - {name: uninstall, run: [helm, uninstall, "rel-{{ vars.pool }}"], on_error: continue}
  prepare:
    - {name: label, run: [kubectl, label, nodes, --all, "gpu-pool={{ vars.pool }}"]}
    - parallel:
        - name: warm
          run: [warm.sh, "{{ deployments.stable.name }}", "{{ deployments[0].params.ttft_ms }}"]
          timeout_s: 60
        - {name: scale-up, command: cluster.set_scale, prefix: sutest, extra: {scale: 4}}
  test:
    - {name: after, capture: [state], when: after}
    - {name: before, run: [login, "--token={{ vars.token }}"]}
commands:
  sutest/cluster.set_scale: {name: "ms-{{ vars.pool }}", scale: SET_AT_RUNTIME, dry: false}
  driver/cluster.set_scale: {name: driver-ms, scale: SET_AT_RUNTIME}
presets:
  h100: {vars.pool: h100}
"""


def write(tmp_path: Path, text: str, script: bool = True) -> Path:
    if script:
        tool = tmp_path / "toolbox" / "cluster" / "set_scale.sh"
        tool.parent.mkdir(parents=True, exist_ok=True)
        tool.write_text('#!/bin/sh\necho "$@"\n')
        tool.chmod(0o755)
    path = tmp_path / "campaign.yaml"
    path.write_text(text)
    return path


def test_steps_are_numbered_in_execution_order_with_rendered_arguments(tmp_path: Path) -> None:
    loaded = load_campaign(write(tmp_path, HEAD + STEPS))
    steps = planned_steps(loaded)
    assert [s.dirname for s in steps] == [
        "001__cleanup__uninstall",
        "002__prepare__label",
        "003__prepare__warm",
        "004__prepare__scale-up",
        "005__test__before",  # before the treatments though written second
        "006__test__after",
        "007__final_cleanup__uninstall",  # cleanup's steps again at the end (TOPSAIL)
    ]
    by = {s.dirname: s for s in steps}
    assert by["003__prepare__warm"].block == by["004__prepare__scale-up"].block
    assert by["002__prepare__label"].block != by["003__prepare__warm"].block
    assert by["002__prepare__label"].argv[-1] == "gpu-pool=a100"
    assert by["003__prepare__warm"].argv == ("warm.sh", "stable", "3.0")  # as resolved
    assert by["003__prepare__warm"].timeout_s == 60
    scale = by["004__prepare__scale-up"]
    assert scale.command == "sutest/cluster.set_scale"
    assert dict(scale.args) == {"name": "ms-a100", "scale": 4, "dry": False}
    script = str((tmp_path / "toolbox/cluster/set_scale.sh").resolve())
    assert scale.argv == (script, "--name=ms-a100", "--scale=4", "--dry=false")
    # a secret stays a reference in the plan and is shown as ***
    assert by["005__test__before"].argv[-1] == "--token=${env:H21_TOKEN}"
    assert by["005__test__before"].shown()[-1] == "--token=***"
    assert by["001__cleanup__uninstall"].on_error == "continue"


def test_presets_and_set_change_vars_and_explain_traces_them(tmp_path: Path) -> None:
    path = write(tmp_path, HEAD + STEPS)
    by_preset = planned_steps(load_campaign(path, ["h100"]))
    assert by_preset[1].argv[-1] == "gpu-pool=h100"
    loaded = load_campaign(path, ["h100"], ["vars.pool=mi300"])
    assert planned_steps(loaded)[1].argv[-1] == "gpu-pool=mi300"
    value, source = loaded.explain("vars.pool")
    assert value == "mi300"
    assert source == "--set vars.pool=mi300"
    value, source = load_campaign(path, ["h100"]).explain("vars.pool")
    assert (value, source.split(" (")[0]) == ("h100", "preset h100")


def test_extra_wins_over_the_entry_and_suffix_selects_the_key(tmp_path: Path) -> None:
    text = HEAD + textwrap.dedent(
        """\
        steps:
          prepare:
            - {name: a, command: cluster.set_scale, prefix: driver, extra: {scale: 2, name: x}}
            - {name: b, command: cluster.set_scale, suffix: late, extra: {scale: "{{ vars.pool }}"}}
        commands:
          driver/cluster.set_scale: {name: driver-ms, scale: SET_AT_RUNTIME}
          cluster.set_scale/late: {name: late-ms, scale: SET_AT_RUNTIME}
        """
    )
    steps = planned_steps(load_campaign(write(tmp_path, text)))
    assert dict(steps[0].args) == {"name": "x", "scale": 2}
    assert (steps[1].command, dict(steps[1].args)) == (
        "cluster.set_scale/late",
        {"name": "late-ms", "scale": "a100"},
    )


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


@pytest.mark.parametrize(
    ("steps", "needle", "expected"),
    [
        (
            "steps:\n  prepare:\n    - {name: a, run: [echo, '{{ vars.pol }}']}\n",
            "name: a",
            "has no attribute 'pol'",
        ),
        (
            "steps:\n  test:\n    - {name: a, run: [echo, '{{ nothing }}']}\n",
            "name: a",
            "'nothing' is undefined",
        ),
        (
            "steps:\n  prepare:\n    - {name: a, command: cluster.set_scale, prefix: sutest}\n"
            "commands:\n  sutest/cluster.set_scale: {scale: SET_AT_RUNTIME}\n",
            "name: a",
            "only this step's extra: may give it",
        ),
        (
            "steps:\n  prepare:\n    - {name: a, command: cluster.set_scale, prefix: nobody}\n",
            "name: a",
            "no commands: entry 'nobody/cluster.set_scale'",
        ),
        (
            "steps:\n  prepare:\n    - {name: a, command: cluster.missing}\n"
            "commands:\n  cluster.missing: {}\n",
            "name: a",
            "runs the toolbox script",
        ),
        (
            "steps:\n  prepare:\n    - {name: a, run: 'echo hi | wc'}\n",
            "name: a",
            "set shell: true",
        ),
        (
            "steps:\n  prepare:\n    - {name: a, run: [a], when: after}\n",
            "name: a",
            "when: places a test step",
        ),
        (
            "steps:\n  prepare:\n    - {name: a, run: [a]}\n    - {name: a, run: [b]}\n",
            "name: a, run: [b]",
            "is repeated in prepare",
        ),
        (
            "steps:\n  prepare:\n    - {name: a, run: [a], extra: {x: 1}}\n",
            "name: a",
            "extra: selects a named command's arguments",
        ),
        (
            "steps:\n  prepare:\n    - {name: a, run: [a], capture: [state]}\n",
            "name: a",
            "exactly one of run:, command:, capture:",
        ),
    ],
)
def test_mistakes_are_refused_at_validation_with_the_line(
    tmp_path: Path, steps: str, needle: str, expected: str
) -> None:
    text = HEAD + steps
    path = write(tmp_path, text)
    with pytest.raises(CampaignError) as info:
        check_inputs(load_campaign(path))
    message = str(info.value)
    assert expected in message, message
    assert f"{path}:{_line_of(text, needle)}:" in message, message


def test_a_script_that_is_not_executable_is_refused(tmp_path: Path) -> None:
    text = HEAD + "steps:\n  prepare:\n    - {name: a, command: cluster.set_scale, extra: {}}\n"
    text += "commands:\n  cluster.set_scale: {n: 1}\n"
    path = write(tmp_path, text)
    (tmp_path / "toolbox/cluster/set_scale.sh").chmod(0o644)
    with pytest.raises(CampaignError, match=r"is not executable — chmod \+x"):
        check_inputs(load_campaign(path))


def test_validate_exits_2_and_plan_shows_rendered_steps_with_secrets_masked(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, HEAD + STEPS)
    env = {**os.environ, "PYTHONPATH": str(SRC), "H21_TOKEN": "s3cr3t-value"}
    shown = subprocess.run(
        [sys.executable, "-m", "testbed", "plan", str(path), "--json"],
        capture_output=True, text=True, env=env, check=False, timeout=60,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "s3cr3t-value" not in shown.stdout
    steps = json.loads(shown.stdout)["steps"]
    assert steps[4]["argv"] == ["login", "--token=***"]
    assert steps[3]["args"] == {"name": "ms-a100", "scale": 4, "dry": False}
    broken = path.read_text().replace('vars.pool }}"]}', 'vars.pools }}"]}', 1)
    path.write_text(broken)
    refused = subprocess.run(
        [sys.executable, "-m", "testbed", "validate", str(path)],
        capture_output=True, text=True, env=env, check=False, timeout=60,
    )  # fmt: skip
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"{path}:" in refused.stderr
    assert "pools" in refused.stderr


def test_export_refuses_steps_it_would_not_run(tmp_path: Path) -> None:
    path = write(tmp_path, HEAD + STEPS)
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    refused = subprocess.run(
        [sys.executable, "-m", "testbed", "export", "tekton", str(path),
         "--upload", "s3://bucket/runs", "-o", str(tmp_path / "out")],
        capture_output=True, text=True, env=env, check=False, timeout=60,
    )  # fmt: skip
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "an exported pipeline does not run" in refused.stderr
    assert not (tmp_path / "out").exists()


def test_cluster_only_orchestration_is_refused_elsewhere(tmp_path: Path) -> None:
    path = write(tmp_path, HEAD + "execution: {capture: {namespaces: [kserve]}}\n")
    with pytest.raises(CampaignError, match=r"capture\.namespaces names a cluster's namespaces"):
        check_inputs(load_campaign(path))
    with pytest.raises(CampaignError, match=r"execution\.keep leaves a cluster's servers"):
        check_inputs(
            load_campaign(path, sets=["execution.capture.namespaces=[]", "execution.keep=true"])
        )
    external = HEAD.replace("server: sim, params: {ttft_ms: 3}", "server: external, url: http://x")
    path = write(tmp_path, external + "backend: external\nexecution: {capture: {state: true}}\n")
    with pytest.raises(CampaignError, match="backend: external runs nothing"):
        check_inputs(load_campaign(path))
