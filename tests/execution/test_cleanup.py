"""testbed cleanup DIR ends the server process groups a killed run left behind (recorded in
DIR/pids/*.json), and only those."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest

from testbed.cli import main
from testbed.core.errors import EXIT_INPUT

CAMPAIGN = textwrap.dedent(
    """\
    name: left
    deployments:
      - name: sim
        server: sim
    load:
      requests: 2
    """
)


def start_time(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]


def leftover(run: Path, name: str) -> subprocess.Popen[bytes]:
    """A process group standing for a server whose testbed was SIGKILLed."""
    process = subprocess.Popen(["sleep", "300"], start_new_session=True)
    (run / "pids").mkdir(parents=True, exist_ok=True)
    (run / "pids" / f"{name}.json").write_text(
        json.dumps({"pid": process.pid, "start": start_time(process.pid)})
    )
    return process


@pytest.mark.parametrize("valid_campaign", [True, False])
def test_cleanup_ends_recorded_groups(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], valid_campaign: bool
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "campaign.resolved.yaml").write_text(CAMPAIGN if valid_campaign else "name: [broken")
    (run / "run.json").write_text(json.dumps({"run_id": "run"}))
    victim = leftover(run, "w1")
    bystander = subprocess.Popen(["sleep", "300"], start_new_session=True)  # not recorded
    try:
        assert main(["cleanup", str(run)]) == 0
        assert victim.wait(timeout=10) == -9
        assert bystander.poll() is None  # untouched
        out = capsys.readouterr().out
        assert f"ended leftover server process group {victim.pid}" in out
        assert ("campaign not loadable" in out) != valid_campaign
        assert not list((run / "pids").glob("*.json"))
        assert main(["cleanup", str(run)]) == 0  # idempotent
        assert "nothing left behind" in capsys.readouterr().out
    finally:
        bystander.kill()
        bystander.wait()
        victim.kill()
        victim.wait()


def test_a_reused_pid_is_not_killed(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "campaign.resolved.yaml").write_text(CAMPAIGN)
    (run / "run.json").write_text(json.dumps({"run_id": "run"}))
    other = leftover(run, "w1")
    try:
        record = json.loads((run / "pids" / "w1.json").read_text())
        record["start"] = "1"  # the recorded process started at another time: not this one
        (run / "pids" / "w1.json").write_text(json.dumps(record))
        assert main(["cleanup", str(run)]) == 0
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_not_a_run_directory(tmp_path: Path) -> None:
    assert main(["cleanup", str(tmp_path)]) == EXIT_INPUT
