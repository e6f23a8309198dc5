"""Results that survive anything: ``testbed run`` SIGKILLed at several points of a run, then
``testbed run --resume`` until it completes; and SIGINT/SIGTERM to a running ``testbed run``.

After the kills and resumes: treatments finished before a kill are kept byte for byte and
never re-run; the interrupted ones are completed, their partial records kept under
``attempts/``; no record is duplicated; no server process survives; the final summary has
every treatment.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REQUESTS = 30
CAMPAIGN = textwrap.dedent(
    f"""\
    name: resume
    deployments:
      - name: sim
        server: sim
        params: {{ttft_ms: 5, itl_ms: 3, max_concurrency: 16}}
    matrix:
      factors:
        deployments.params.itl_ms: [3, 4]
        load.concurrency: [1, 2, 3]
    load:
      profile: concurrency
      requests: {REQUESTS}
      duration_s: 60
      dataset: {{kind: synthetic, input_tokens: 16, output_tokens: 24}}
    execution:
      strategy: sequential
    """
)
DEADLINE_S = 120.0


class Run:
    """One ``testbed run`` child process and what can be observed from outside."""

    def __init__(self, tmp: Path, out: Path, resume: bool) -> None:
        self.out = out
        self.log = (tmp / f"testbed-{time.monotonic_ns()}.log").open("wb")
        args = ["--resume", str(out)] if resume else [str(tmp / "campaign.yaml"), "--out", str(out)]
        env = {k: v for k, v in os.environ.items() if k != "TESTBED_INDEX_URL"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "testbed", "run", *args],
            cwd=tmp,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env,
        )

    def output(self) -> str:
        if not self.log.closed:
            self.log.flush()
        return Path(self.log.name).read_text(errors="replace")

    def wait_until(self, condition: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            if condition():
                return
            if self.process.poll() is not None:
                pytest.fail(
                    f"testbed exited ({self.process.returncode}) before {what}:\n{self.output()}"
                )
            time.sleep(0.02)
        pytest.fail(f"timed out waiting for {what}:\n{self.output()}")

    def kill(self, sig: int = signal.SIGKILL) -> int:
        self.process.send_signal(sig)
        code = self.process.wait(timeout=60)
        self.log.close()
        return code

    def finish(self) -> int:
        code = self.process.wait(timeout=DEADLINE_S * 2)
        self.log.close()
        return code


def ledger(out: Path) -> dict[str, tuple[str, str | None, int]]:
    """id → (state, status, attempts), read without writing."""
    path = out / "ledger.sqlite"
    if not path.exists():
        return {}
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as db:
            rows = db.execute("SELECT id, state, status, attempts FROM treatments").fetchall()
    except sqlite3.OperationalError:
        return {}  # the schema is being created
    return {r[0]: (r[1], r[2], r[3]) for r in rows}


def finished(out: Path) -> set[str]:
    return {
        tid
        for tid, (state, status, _) in ledger(out).items()
        if state == "finished" and status != "ERROR"
    }


def dirs(out: Path) -> dict[str, str]:
    """treatment id → directory name, from the plan."""
    plan = json.loads((out / "plan.json").read_text())
    return {t["id"]: t["dir"] for t in plan["treatments"]}


def record_count(folder: Path) -> int:
    path = folder / "records.jsonl"
    return path.read_bytes().count(b"\n") if path.exists() else 0


def server_pids(out: Path) -> set[int]:
    pids = set()
    for pid_file in (out / "pids").glob("*.json"):
        try:
            pids.add(int(json.loads(pid_file.read_text())["pid"]))
        except (OSError, ValueError, KeyError):
            continue  # being written
    return pids


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting to be reaped does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def snapshot(out: Path, ids: set[str]) -> dict[str, tuple[bytes, bool, int]]:
    """summary.json bytes, whether attempts/ exists, attempts in the ledger."""
    names, states = dirs(out), ledger(out)
    return {
        tid: (
            (out / names[tid] / "summary.json").read_bytes(),
            (out / names[tid] / "attempts").exists(),
            states[tid][2],
        )
        for tid in ids
    }


@pytest.fixture
def campaign(tmp_path: Path) -> Path:
    path = tmp_path / "campaign.yaml"
    path.write_text(CAMPAIGN)
    return path


@pytest.mark.usefixtures("campaign")
def test_sigkill_at_several_points_then_resume(tmp_path: Path) -> None:
    out = tmp_path / "run"
    seen_pids: set[int] = set()
    kept: dict[str, tuple[bytes, bool, int]] = {}

    # 1. killed in the middle of the first treatment
    first = Run(tmp_path, out, resume=False)
    first.wait_until((out / "plan.json").exists, "the plan")
    names = dirs(out)
    order = sorted(names, key=lambda tid: names[tid])
    first_dir = out / names[order[0]]
    first.wait_until(lambda: record_count(first_dir) >= 5, "records of the first treatment")
    seen_pids |= server_pids(out)
    assert first.kill() == -signal.SIGKILL
    partial = record_count(first_dir)
    assert ledger(out)[order[0]][0] == "running"

    # 2. resumed, killed after three treatments finished, in the middle of the fourth
    second = Run(tmp_path, out, resume=True)
    second.wait_until(lambda: len(finished(out)) >= 3, "three finished treatments")
    kept |= snapshot(out, finished(out))
    fourth = out / names[order[3]]
    second.wait_until(lambda: record_count(fourth) >= 3 or len(finished(out)) > 3, "the fourth")
    seen_pids |= server_pids(out)
    assert second.kill() == -signal.SIGKILL
    kept = {**snapshot(out, finished(out) - set(kept)), **kept}

    # 3. resumed, killed the moment a fifth treatment is finished (between treatments)
    third = Run(tmp_path, out, resume=True)
    third.wait_until(lambda: len(finished(out)) >= 5, "five finished treatments")
    seen_pids |= server_pids(out)
    assert third.kill() == -signal.SIGKILL
    kept = {**snapshot(out, finished(out) - set(kept)), **kept}
    assert len(kept) >= 5

    # 4. resumed to the end
    last = Run(tmp_path, out, resume=True)
    code = last.finish()
    output = last.output()
    assert code == 0, output
    assert "--resume" not in output

    states = ledger(out)
    assert all(
        state == "finished" and status in ("PASS", "INCONCLUSIVE")
        for state, status, _ in states.values()
    ), states
    for tid, before in kept.items():  # kept byte for byte, never re-run
        assert snapshot(out, {tid})[tid] == before, names[tid]
    assert states[order[0]][2] == 2  # the treatment killed mid-way ran once more …
    kept_records = first_dir / "attempts" / "1" / "records.jsonl"
    assert record_count(kept_records.parent) >= partial  # … and its partial records are kept
    for tid, name in names.items():
        summary = json.loads((out / name / "summary.json").read_text())
        text = (out / name / "records.jsonl").read_text()
        lines = [json.loads(line) for line in text.splitlines()]
        numbers = [r["n"] for r in lines]
        assert len(numbers) == len(set(numbers)) == REQUESTS == summary["records"], name
        assert summary["attempt"] == states[tid][2]
    run_summary = json.loads((out / "summary.json").read_text())
    assert [t["dir"] for t in run_summary["treatments"]] == [names[t] for t in order]
    assert {t["status"] for t in run_summary["treatments"]} <= {"PASS", "INCONCLUSIVE"}
    assert (out / "report.html").is_file()
    assert (out / "junit.xml").is_file()
    seen_pids |= {
        w["pid"]
        for name in names.values()
        for w in json.loads((out / name / "summary.json").read_text())["workers"]
    }
    assert not list((out / "pids").glob("*.json"))
    assert not [pid for pid in seen_pids if alive(pid)], "a server process survived"


@pytest.mark.usefixtures("campaign")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_sigint_and_sigterm_stop_cleanly(tmp_path: Path, sig: signal.Signals) -> None:
    out = tmp_path / "run"
    run = Run(tmp_path, out, resume=False)
    run.wait_until((out / "plan.json").exists, "the plan")
    names = dirs(out)
    first = out / names[min(names, key=lambda tid: names[tid])]
    run.wait_until(lambda: record_count(first) >= 3, "records")
    pids = server_pids(out)
    assert pids
    assert run.kill(sig) == 130
    output = run.output()
    assert f"testbed run --resume {out}" in output
    assert record_count(first) >= 3  # what was recorded is on disk
    assert not list((out / "pids").glob("*.json"))
    assert not [pid for pid in pids if alive(pid)], "a server process survived"
    if sig == signal.SIGTERM:
        return
    resumed = Run(tmp_path, out, resume=True)  # and the run can be finished
    assert resumed.finish() == 0, resumed.output()
    assert len(finished(out)) == len(names)
