"""examples/topsail-presets.yaml on this machine: its steps run in numbered folders in
execution order (the parallel pair numbered too), the named command gets its commands:
entry with the step's extra, and each treatment is captured before and after."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
#: The example's steps under the smoke preset, in execution order (locally and on a cluster).
TOPSAIL_STEPS = [
    "001__cleanup__unlabel-nodes",
    "002__prepare__record-settings",
    "003__prepare__label-nodes",
    "004__prepare__python-version",
    "005__test__snapshot-before",
    "006__test__snapshot-after",
    "007__final_cleanup__unlabel-nodes",
]


def test_the_topsail_example_runs_its_steps_locally(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "testbed", "run", str(ROOT / "examples/topsail-presets.yaml"),
         "--preset", "smoke", "--out", "run"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    run = tmp_path / "run"
    assert sorted(p.name for p in (run / "steps").iterdir() if p.is_dir()) == TOPSAIL_STEPS
    settings = (run / "steps/002__prepare__record-settings/settings.txt").read_text()
    assert settings == "pool=cpu run=run deployments=stable,tuned\n"
    label = run / "steps/003__prepare__label-nodes"
    assert (label / "label.txt").read_text() == "topsail.example/pool=cpu\n"
    assert "no cluster (local backend)" in (label / "stdout.log").read_text()
    step = json.loads((label / "step.json").read_text())
    assert step["argv"][1:] == ["--key=topsail.example/pool", "--value=cpu", "--dry_run=false"]
    for treatment in sorted(run.glob("00*__*-load__*")):
        for when in ("state-before", "state-after"):
            table = (treatment / when / "processes.txt").read_text()
            assert "serve" in table, table  # the worker's simulator process
