"""The steps' part of a run directory: what ran, in which folder, with what outcome::

runs/<run-id>/steps/
  plan.json                        every planned step (argv with secrets as ***), skipped phases
  001__cleanup__uninstall/         step.json  stdout.log  stderr.log  (+ what the step wrote
  002__prepare__label-gpu-nodes/    into $ARTIFACT_DIR; attempts/<n>/ of earlier tries)

``step.json`` holds the rendered arguments, the exit code, the duration and the status:
``ok``, ``failed``, ``timed out``, ``interrupted`` or ``running`` (a run killed mid-step).
A step that failed without ``on_error: continue`` makes the run an ERROR
(:func:`step_statuses`); one with it is shown, not counted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from testbed.results.files import read_object
from testbed.results.verdict import Status

STEPS_DIR = "steps"
STEP_FILE = "step.json"
STEPS_PLAN = "plan.json"
STDOUT = "stdout.log"
STDERR = "stderr.log"
OK = "ok"
#: Captures around a treatment, in its folder (execution.capture): the Prometheus series,
#: and notes on every capture (warnings included); state dumps go to state-before/-after.
PROMETHEUS_FILE = "prometheus.json"
CAPTURES_FILE = "captures.json"
#: Outcomes of a step that ended (``--resume`` skips the steps that finished ``ok``).
FAILED_STATES = ("failed", "timed out", "interrupted", "running")


def steps_dir(run_path: Path) -> Path:
    return run_path / STEPS_DIR


def read_step(folder: Path) -> dict[str, Any]:
    """A step folder's step.json, or {} when there is none."""
    return read_object(folder / STEP_FILE)


def step_rows(run_path: Path) -> list[dict[str, Any]]:
    """One row per planned step, in execution order: its plan joined with its step.json
    (``status`` ``not run`` when it never started, ``skipped`` when its phase was)."""
    try:
        plan = json.loads((steps_dir(run_path) / STEPS_PLAN).read_text())
    except (OSError, ValueError):
        return []
    skipped = set(plan.get("skipped_phases") or [])
    rows = []
    for planned in plan.get("steps") or []:
        record = read_step(steps_dir(run_path) / planned["dir"])
        status = record.get("status") or ("skipped" if planned["phase"] in skipped else "not run")
        rows.append({**planned, **record, "status": status})
    return rows


def blocking(row: Mapping[str, Any]) -> bool:
    """Whether this step's outcome makes the run an ERROR."""
    return row.get("status") in FAILED_STATES and row.get("on_error") != "continue"


def step_statuses(rows: list[dict[str, Any]]) -> list[Status]:
    """The statuses the steps add to the run's: ERROR for each blocking failure."""
    return [Status.ERROR for row in rows if blocking(row)]
