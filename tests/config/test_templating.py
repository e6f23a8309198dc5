"""Step and command templates are data (security suite): `testbed validate` and `testbed plan
--json` of a campaign whose arguments walk Python's objects, load another file or loop without
end exit 2 at the template's file:line, start no process and write nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.core.test_templates import ESCAPES

pytestmark = pytest.mark.security

SRC = Path(__file__).resolve().parents[2] / "src"

HEAD = """\
name: sandboxed
deployments: [{name: stable, server: sim}]
load: {requests: 4, dataset: {kind: synthetic, input_tokens: 8, output_tokens: 4}}
vars: {pool: a100}
"""

#: Where a template may sit: (the campaign's tail, with TEMPLATE where it goes).
PLACES = {
    "run argv": "steps:\n  prepare:\n    - name: a\n      run: [echo, 'TEMPLATE']\n",
    "shell line": "steps:\n  prepare:\n    - name: a\n      shell: true\n      run: 'TEMPLATE'\n",
    "command entry": (
        "steps:\n  prepare:\n    - {name: a, command: cluster.set_scale}\n"
        "commands:\n  cluster.set_scale:\n    name: 'TEMPLATE'\n"
    ),
    "extra": (
        "steps:\n  prepare:\n    - name: a\n      command: cluster.set_scale\n"
        "      extra: {name: 'TEMPLATE'}\n"
        "commands:\n  cluster.set_scale: {name: SET_AT_RUNTIME}\n"
    ),
}

REFUSED = [
    *ESCAPES,
    "{% include '/etc/passwd' %}",
    "{% for i in range(10**9) %}{{ i }}{% endfor %}",
]


def _campaign(folder: Path, place: str, template: str) -> tuple[Path, int]:
    """The campaign file and the line its template is on."""
    tool = folder / "toolbox" / "cluster" / "set_scale"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\ntouch STEP_RAN\n")
    tool.chmod(0o755)
    text = HEAD + PLACES[place]
    line = next(i for i, row in enumerate(text.splitlines(), 1) if "TEMPLATE" in row)
    path = folder / "campaign.yaml"
    path.write_text(text.replace("TEMPLATE", template.replace("'", "''")))
    return path, line


def _tree(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


#: Every refused template, each place at least once (two CLI runs a case: keep them few).
CASES = [(sorted(PLACES)[i % len(PLACES)], template) for i, template in enumerate(REFUSED)]


@pytest.mark.parametrize(("place", "template"), CASES)
def test_validate_and_plan_refuse_it_at_file_line_and_run_nothing(
    tmp_path: Path, place: str, template: str
) -> None:
    path, line = _campaign(tmp_path, place, template)
    before = _tree(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    for verb in (["validate"], ["plan", "--json"]):
        done = subprocess.run(
            [sys.executable, "-m", "testbed", *verb, str(path)],
            capture_output=True, text=True, env=env, cwd=tmp_path, check=False, timeout=60,
        )  # fmt: skip
        assert done.returncode == 2, f"{verb}: {done.stdout}{done.stderr}"
        assert f"{path}:{line}:" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
        assert "uid=" not in done.stdout  # the output of `id` never shows
    assert _tree(tmp_path) == before  # no MARKER, no STEP_RAN, nothing else
