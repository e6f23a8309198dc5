"""Steps running in a real run on the local backend: numbered folders with output, exit code,
duration and rendered arguments; ARTIFACT_DIR; parallel siblings at once; a failing step is
the run's ERROR (exit 3) with its last lines while later phases are NOT RUN and the final
cleanup runs; timeouts and Ctrl-C stop whole process groups; --resume and --skip-phase."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

SRC = Path(__file__).resolve().parents[2] / "src"

HEAD = """\
name: steps-run
deployments: [{name: stable, server: sim, params: {ttft_ms: 2, itl_ms: 1}}]
load:
  requests: 4
  dataset: {kind: synthetic, input_tokens: 8, output_tokens: 4}
  selfcheck: {max_lag_p99_ms: 250, max_cpu_fraction: 1.0}
vars: {pool: a100, token: "${env:H21_TOKEN}"}
"""


def run_testbed(
    tmp_path: Path, *args: str, timeout: float = 240, token: str = "tok-value-9"
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC), "H21_TOKEN": token, "H21_OTHER": "Wq"}
    return subprocess.run(
        [sys.executable, "-m", "testbed", *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def campaign(tmp_path: Path, steps: str) -> Path:
    path = tmp_path / "campaign.yaml"
    path.write_text(HEAD + steps)
    return path


def step(run: Path, dirname: str) -> dict[str, Any]:
    return dict(json.loads((run / "steps" / dirname / "step.json").read_text()))


def folders(run: Path) -> list[str]:
    return sorted(p.name for p in (run / "steps").iterdir() if p.is_dir())


STEPS = """\
steps:
  cleanup:
    - {name: uninstall, run: [sh, -c, 'echo uninstall $TESTBED_PHASE'], on_error: continue}
  prepare:
    - name: label
      run: [sh, -c, 'echo "pool=$1 token=$2 dir=$ARTIFACT_DIR" && echo note > "$ARTIFACT_DIR/x"',
            sh, "{{ vars.pool }}", "{{ vars.token }}"]
    - parallel:  # each waits for the other's file: only running at once ends
        - name: left
          run: [sh, -c, 'touch "$TESTBED_RUN_DIR/$1"; until [ -f "$TESTBED_RUN_DIR/$2" ]; do
                sleep 0.05; done', sh, l, r]
          timeout_s: 60
        - name: right
          run: [sh, -c, 'touch "$TESTBED_RUN_DIR/$1"; until [ -f "$TESTBED_RUN_DIR/$2" ]; do
                sleep 0.05; done', sh, r, l]
          timeout_s: 60
  test:
    - {name: snapshot-before, capture: [state]}
    - {name: count, run: [sh, -c, 'ls "$TESTBED_RUN_DIR"'], when: after}
"""


def test_steps_run_in_numbered_folders_around_the_treatments(tmp_path: Path) -> None:
    done = run_testbed(tmp_path, "run", str(campaign(tmp_path, STEPS)), "--out", "run")
    assert done.returncode == 0, done.stdout + done.stderr
    run = tmp_path / "run"
    assert folders(run) == [
        "001__cleanup__uninstall",
        "002__prepare__label",
        "003__prepare__left",
        "004__prepare__right",
        "005__test__snapshot-before",
        "006__test__count",
        "007__final_cleanup__uninstall",
    ]
    label = step(run, "002__prepare__label")
    assert (label["status"], label["exit_code"]) == ("ok", 0)
    assert label["duration_s"] >= 0
    assert label["argv"][-2:] == ["a100", "***"]  # rendered, the secret masked
    out = (run / "steps/002__prepare__label/stdout.log").read_text()
    artifact = (run / "steps/002__prepare__label").resolve()
    assert out == f"pool=a100 token=tok-value-9 dir={artifact}\n"  # the child got the value
    assert (artifact / "x").read_text() == "note\n"
    assert "tok-value-9" not in (run / "steps/002__prepare__label/step.json").read_text()
    assert step(run, "004__prepare__right")["status"] == "ok"  # they ran at once
    # the test steps: one before the treatment, one after it (the treatment folder exists)
    listing = (run / "steps/006__test__count/stdout.log").read_text().split()
    assert any(name.startswith("001__stable-load") for name in listing)
    assert (run / "steps/005__test__snapshot-before/processes.txt").is_file()
    final = (run / "steps/007__final_cleanup__uninstall/stdout.log").read_text()
    assert final == "uninstall final_cleanup\n"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "PASS"
    assert [s["status"] for s in summary["steps"]] == ["ok"] * 7
    html = (run / "report.html").read_text()
    assert 'href="steps/004__prepare__right/"' in html


FAILING = """\
steps:
  cleanup:
    - {name: uninstall, run: [sh, -c, 'echo cleaned'], on_error: continue}
  prepare:
    - {name: tolerated, run: [sh, -c, 'exit 4'], on_error: continue}
    - name: broken
      run: [sh, -c, 'echo "the reason it broke, $1" >&2; exit 7', sh, "{{ vars.token }}"]
    - {name: never, run: [sh, -c, 'echo never']}
  test:
    - {name: not-either, run: [sh, -c, 'echo no']}
"""


def test_a_failing_step_is_the_runs_error_and_the_final_cleanup_still_runs(
    tmp_path: Path,
) -> None:
    done = run_testbed(tmp_path, "run", str(campaign(tmp_path, FAILING)), "--out", "run")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "the reason it broke" in done.stdout
    run = tmp_path / "run"
    assert folders(run) == [
        "001__cleanup__uninstall",
        "002__prepare__tolerated",
        "003__prepare__broken",
        "006__final_cleanup__uninstall",
    ]
    broken = step(run, "003__prepare__broken")
    assert (broken["status"], broken["exit_code"]) == ("failed", 7)
    assert broken["tail"] == ["the reason it broke, ***"]  # the secret it echoed, masked
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "ERROR"
    assert [t["status"] for t in summary["treatments"]] == ["NOT RUN"]
    assert (
        summary["treatments"][0]["reason"] == "not run: step 003__prepare__broken failed (failed)"
    )
    statuses = {s["dir"]: s["status"] for s in summary["steps"]}
    assert statuses == {
        "001__cleanup__uninstall": "ok",
        "002__prepare__tolerated": "failed",  # on_error: continue — shown, not counted
        "003__prepare__broken": "failed",
        "004__prepare__never": "not run",
        "005__test__not-either": "not run",
        "006__final_cleanup__uninstall": "ok",
    }
    html = (run / "report.html").read_text()
    assert "the reason it broke" in html
    assert "tok-value-9" not in html
    assert "failed (on_error: continue)" in html
    junit = (run / "junit.xml").read_text()
    assert '<testcase classname="steps-run.steps.prepare" name="003__prepare__broken"' in junit
    assert '<error message="failed: exit 7">the reason it broke, ***</error>' in junit


SHORT = """\
steps:
  prepare:
    - name: broken
      run: [sh, -c, 'echo "refused $1, other $H21_OTHER" >&2; exit 7', sh, "{{ vars.token }}"]
"""


@pytest.mark.security
def test_short_secrets_are_masked_in_step_json_summary_and_report(tmp_path: Path) -> None:
    # Qz7: a 3-character token (masked only from 4 characters up before); Wq: a secret the
    # campaign references elsewhere, which the step reads from the environment it inherits.
    text = HEAD.replace("token:", 'other: "${env:H21_OTHER}", token:') + SHORT
    path = tmp_path / "campaign.yaml"
    path.write_text(text)
    done = run_testbed(tmp_path, "run", str(path), "--out", "run", token="Qz7")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "refused ***, other ***" in done.stdout
    run = tmp_path / "run"
    assert step(run, "001__prepare__broken")["tail"] == ["refused ***, other ***"]
    for shown in (done.stdout, done.stderr, *(
        (run / name).read_text()
        for name in ("steps/001__prepare__broken/step.json", "summary.json", "report.html",
                     "junit.xml")
    )):  # fmt: skip
        assert "Qz7" not in shown
        assert "refused Wq" not in shown
        assert "other Wq" not in shown


def test_a_timeout_stops_the_steps_whole_process_group(tmp_path: Path) -> None:
    steps = """\
steps:
  prepare:
    - name: hangs
      run: [sh, -c, 'sleep 300 & echo $! > "$ARTIFACT_DIR/child"; wait']
      timeout_s: 1
"""
    started = time.monotonic()
    done = run_testbed(tmp_path, "run", str(campaign(tmp_path, steps)), "--out", "run")
    assert done.returncode == 3, done.stdout + done.stderr
    assert time.monotonic() - started < 120
    record = step(tmp_path / "run", "001__prepare__hangs")
    assert record["status"] == "timed out"
    child = int((tmp_path / "run/steps/001__prepare__hangs/child").read_text())
    assert not _alive(child)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_ctrl_c_stops_running_steps_runs_the_cleanup_and_exits_130(tmp_path: Path) -> None:
    steps = """\
steps:
  cleanup:
    - {name: uninstall, run: [sh, -c, 'echo $TESTBED_PHASE'], on_error: continue}
  prepare:
    - name: long
      run: [sh, -c, 'sleep 300 & echo $! > "$ARTIFACT_DIR/child"; wait']
"""
    path = campaign(tmp_path, steps)
    env = {**os.environ, "PYTHONPATH": str(SRC), "H21_TOKEN": "x"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "testbed", "run", str(path), "--out", "run"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    child_file = tmp_path / "run/steps/002__prepare__long/child"
    deadline = time.monotonic() + 120
    while not (child_file.is_file() and child_file.read_text().strip()):
        assert time.monotonic() < deadline, "the step never started"
        assert proc.poll() is None, proc.communicate()[0]
        time.sleep(0.1)
    child = int(child_file.read_text())
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, output
    assert step(tmp_path / "run", "002__prepare__long")["status"] == "interrupted"
    assert not _alive(child)
    final = step(tmp_path / "run", "003__final_cleanup__uninstall")
    assert final["status"] == "ok"
    assert (tmp_path / "run/steps/003__final_cleanup__uninstall/stdout.log").read_text() == (
        "final_cleanup\n"
    )
    assert not list((tmp_path / "run/pids").glob("step-*.json"))


def test_resume_skips_finished_steps_and_skip_phase_skips_a_phase(tmp_path: Path) -> None:
    steps = """\
steps:
  prepare:
    - {name: once, run: [sh, -c, 'echo ran >> "$TESTBED_RUN_DIR/../once.txt"']}
    - name: flaky
      run: [sh, -c, 'test -f "$TESTBED_RUN_DIR/../ok" ||
            { touch "$TESTBED_RUN_DIR/../ok"; echo no >&2; exit 1; }']
  cleanup:
    - {name: tidy, run: [sh, -c, 'echo tidy']}
"""
    path = campaign(tmp_path, steps)
    # the final cleanup skipped: what prepare made is still there for --resume to trust
    first = run_testbed(tmp_path, "run", str(path), "--out", "run", "--skip-phase", "final_cleanup")
    assert first.returncode == 3, first.stdout + first.stderr
    rows = json.loads((tmp_path / "run/summary.json").read_text())["steps"]
    assert rows[-1]["status"] == "skipped"  # final cleanup's tidy, by --skip-phase
    again = run_testbed(tmp_path, "run", "--resume", "run")
    assert again.returncode == 0, again.stdout + again.stderr
    assert (tmp_path / "once.txt").read_text() == "ran\n"  # not run twice
    flaky = tmp_path / "run/steps/003__prepare__flaky"
    assert step(tmp_path / "run", "003__prepare__flaky")["status"] == "ok"
    earlier = json.loads((flaky / "attempts/1/step.json").read_text())
    assert earlier["status"] == "failed"  # the earlier attempt kept
    assert step(tmp_path / "run", "004__final_cleanup__tidy")["status"] == "ok"
    # a run whose final cleanup ran (it undid prepare) runs every step again on --resume
    (tmp_path / "run/summary.json").unlink()
    third = run_testbed(tmp_path, "run", "--resume", "run", "--skip-phase", "test")
    assert third.returncode == 0, third.stdout + third.stderr
    assert (tmp_path / "once.txt").read_text() == "ran\nran\n"


def test_a_killed_runs_step_leaves_no_orphan_after_resume(tmp_path: Path) -> None:
    steps = """\
steps:
  prepare:
    - name: long
      run: [sh, -c, 'test -f "$TESTBED_RUN_DIR/../again" && exit 0;
            sleep 300 & echo $! > "$ARTIFACT_DIR/child"; wait']
"""
    path = campaign(tmp_path, steps)
    env = {**os.environ, "PYTHONPATH": str(SRC), "H21_TOKEN": "x"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "testbed", "run", str(path), "--out", "run"],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    child_file = tmp_path / "run/steps/001__prepare__long/child"
    deadline = time.monotonic() + 120
    while not (child_file.is_file() and child_file.read_text().strip()):
        assert time.monotonic() < deadline, "the step never started"
        assert proc.poll() is None
        time.sleep(0.1)
    child = int(child_file.read_text())
    proc.kill()  # SIGKILL: no cleanup of its own; the shell dies with it, its sleep does not
    proc.wait(timeout=30)
    assert _alive(child)
    (tmp_path / "again").touch()
    resumed = run_testbed(tmp_path, "run", "--resume", "run")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "ended leftover server process group" in resumed.stdout
    assert not _alive(child)
    assert step(tmp_path / "run", "001__prepare__long")["status"] == "ok"
