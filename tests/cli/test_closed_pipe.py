"""A reader that closed standard output (``testbed plan … | head``) is no error: every command
ends quietly with exit 0 (issue 36; the Python docs' "Note on SIGPIPE").

Each command runs as a child process whose standard output is a real pipe with its reading
end already closed, so its first write meets EPIPE whatever the size of its output — the
way ``head`` leaves a writer after its tenth line.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.cli import main

CAMPAIGN = """\
name: piped
deployments:
  - name: one
    server: sim
load:
  profile: concurrency
  requests: 2
"""


def run_into_closed_pipe(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone before the first line is written
    try:
        return subprocess.run(
            [sys.executable, "-m", "testbed", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cwd,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize(
    "args",
    [
        ("schema",),  # print()
        ("plan", "campaign.yaml"),  # rich's console (which raises SystemExit(1) on EPIPE)
        ("plan", "campaign.yaml", "--json"),  # json.dump
        ("validate", "campaign.yaml"),
    ],
    ids=["schema", "plan", "plan-json", "validate"],
)
def test_a_closed_pipe_ends_the_command_quietly_with_0(
    args: tuple[str, ...], tmp_path: Path
) -> None:
    (tmp_path / "campaign.yaml").write_text(CAMPAIGN)
    done = run_into_closed_pipe(*args, cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")


def test_an_open_pipe_still_gets_the_whole_output(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "testbed", "schema"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0
    assert done.stdout.rstrip().endswith("}")


def test_a_broken_pipe_that_is_not_stdout_stays_a_bug(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A socket's EPIPE that reached the command line untranslated is exit 3, not a quiet 0."""

    def breaks(_args: object) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    import testbed.cli.schema

    monkeypatch.setattr(testbed.cli.schema, "handle", breaks)
    assert main(["schema"]) == 3
    assert "internal error: BrokenPipeError" in capsys.readouterr().err
