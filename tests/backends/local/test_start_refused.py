"""The local backend tells a server that refused its input (exit code 2 before it was
ready: testbed's own servers' and argparse's "bad input") from one that failed otherwise:
the first is not started again, the second is retried and says so (issue 32)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from testbed.cli import main
from testbed.servers.adapters import adapter_for

CAMPAIGN = "name: exits\ndeployments:\n  - {name: a, server: sim}\nload: {requests: 1}\n"


def run_exiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> tuple[int, dict[str, Any], str]:
    """A run whose server exits with ``code`` at once (counting its starts in a file)."""
    starts = tmp_path / "starts"
    script = f"open({str(starts)!r}, 'a').write('x'); raise SystemExit({code})"
    adapter = type(adapter_for("sim"))
    monkeypatch.setattr(adapter, "command", lambda *_a: [sys.executable, "-c", script])
    (tmp_path / "c.yaml").write_text(CAMPAIGN)
    result = main(["run", str(tmp_path / "c.yaml"), "--out", str(tmp_path / "run")])
    (summary,) = [json.loads(p.read_text()) for p in (tmp_path / "run").glob("*/summary.json")]
    return result, summary, starts.read_text()


def test_a_server_that_refused_its_input_is_not_started_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, summary, starts = run_exiting(tmp_path, monkeypatch, 2)
    assert code == 3
    assert starts == "x"
    assert "a (sim) exited with code 2 before becoming ready" in summary["verdict"]["reason"]
    assert "retrying" not in capsys.readouterr().out


def test_a_server_that_failed_otherwise_is_retried_visibly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, summary, starts = run_exiting(tmp_path, monkeypatch, 1)
    assert code == 3
    assert starts == "xx"
    assert "a (sim) exited with code 1 before becoming ready" in summary["verdict"]["reason"]
    assert "did not start, retrying" in " ".join(capsys.readouterr().out.split())
