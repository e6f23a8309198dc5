"""Every file of a run folder has one mode, the user's umask respected (issue 36).

summary.json, report.html and junit.xml were written through ``mkstemp`` (always 0600) while
records and logs were 0666 less the umask; the ledger was SQLite's 0644 less the umask. A
real ``testbed run`` of the simulator, in a child process with its own umask, shows the
whole folder; the writers are then checked one by one, in this process.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed.results.files import RecordWriter, create_file, write_atomic, write_json
from testbed.results.ledger import Ledger

CAMPAIGN = """\
name: modes
deployments:
  - name: one
    server: sim
load:
  profile: concurrency
  requests: 2
  plots: false
"""


def modes(folder: Path) -> dict[str, int]:
    """Each file's permission bits, by its path inside ``folder`` (directories apart)."""
    return {
        str(p.relative_to(folder)): stat.S_IMODE(p.stat().st_mode)
        for p in folder.rglob("*")
        if p.is_file()
    }


@pytest.mark.slow
@pytest.mark.parametrize("umask", [0o022, 0o002])
def test_a_run_folder_has_one_file_mode_from_the_umask(tmp_path: Path, umask: int) -> None:
    (tmp_path / "c.yaml").write_text(CAMPAIGN)
    command = [sys.executable, "-m", "testbed", "run", "c.yaml", "--out", "run"]
    done = subprocess.run(
        ["sh", "-c", f'umask {umask:03o}; exec "$@"', "sh", *command],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found = modes(tmp_path / "run")
    for name in ("summary.json", "report.html", "junit.xml", "run.json", "ledger.sqlite"):
        assert name in found
    assert set(found.values()) == {0o666 & ~umask}, found
    folders = {stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "run").rglob("*") if p.is_dir()}
    assert folders == {0o777 & ~umask}


@pytest.fixture
def umask_027() -> Iterator[int]:
    """This process's umask set to 027 for one test (no thread of the suite writes files)."""
    old = os.umask(0o027)
    try:
        yield 0o027
    finally:
        os.umask(old)


def test_each_writer_creates_what_the_umask_allows(tmp_path: Path, umask_027: int) -> None:
    write_atomic(tmp_path / "a.txt", "a")
    write_json(tmp_path / "b.json", {"b": 1})
    with RecordWriter(tmp_path / "r.jsonl") as records:
        records.write({"n": 1})
    with Ledger(tmp_path / "ledger.sqlite"):
        pass
    create_file(tmp_path / "empty")
    assert set(modes(tmp_path).values()) == {0o640}
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_create_file_keeps_an_existing_file(tmp_path: Path) -> None:
    target = tmp_path / "kept"
    target.write_text("data")
    create_file(target)
    assert target.read_text() == "data"
