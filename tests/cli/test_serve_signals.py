"""``testbed serve vllm`` stopped by a signal stops vLLM too (issue 32).

SIGTERM is what systemd, a container runtime or a CI runner sends; before issue 32 it ended
testbed at once and left vLLM serving (5.6 GB resident). A fake vLLM stands in for the real
one (``params.python``): a script that starts an "engine" child, as vLLM does, and says on
its output which signal it got, so the test waits on lines, never on time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubefacts.process_group import group_members

FAKE_VLLM = """\
import os, signal, subprocess, sys, time
stubborn = os.environ.get("FAKE_STUBBORN") == "1"
engine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
def stop(signum, frame):
    print(f"fake vllm got {signal.Signals(signum).name}", flush=True)
    if not stubborn:
        engine.terminate(); engine.wait(); sys.exit(0)
signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
print(f"fake vllm serving pid={os.getpid()} engine={engine.pid}", flush=True)
while True:
    time.sleep(1)
"""


def fake_python(tmp_path: Path) -> Path:
    """An executable that runs the fake vLLM whatever arguments it is given."""
    script = tmp_path / "fake_vllm.py"
    script.write_text(FAKE_VLLM)
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{script}"\n')
    python.chmod(0o755)
    return python


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], int, int]]:
    """``testbed serve vllm`` with the fake, running: (testbed, fake vLLM pid, engine pid)."""
    yield from _serve(tmp_path, stubborn=False)


def _serve(tmp_path: Path, *, stubborn: bool) -> Iterator[tuple[subprocess.Popen[str], int, int]]:
    model = tmp_path / "model"
    model.mkdir()
    env = {**os.environ, "FAKE_STUBBORN": "1" if stubborn else "0"}
    child = subprocess.Popen(
        [sys.executable, "-m", "testbed", "serve", "vllm", "--model", str(model), "--port", "0",
         "--set", f"python={fake_python(tmp_path)}", "--set", "kv_cache_gb=1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line.startswith("fake vllm serving"), line + child.stderr.read()  # type: ignore[union-attr]
    fields = dict(part.split("=") for part in line.split()[3:])
    try:
        yield child, int(fields["pid"]), int(fields["engine"])
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate(timeout=30)
        for pid in (int(fields["pid"]), int(fields["engine"])):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not reaped, counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_stopped_serve_vllm_stops_vllm_and_its_engine(
    serve: tuple[subprocess.Popen[str], int, int], sig: signal.Signals
) -> None:
    child, fake, engine = serve
    child.send_signal(sig)  # to testbed alone, as a container runtime or a CI runner does
    out, err = child.communicate(timeout=60)
    if sig is signal.SIGHUP:  # the fake dies of it (no handler): passed on all the same
        assert "fake vllm got" not in out
    else:
        assert f"fake vllm got {sig.name}" in out  # passed on, not swallowed
    assert child.returncode == 130, err
    assert f"testbed: {sig.name}: vLLM " in err
    assert not _alive(fake)
    assert not _alive(engine)
    # the fake led its own group: nothing of it runs (a zombie awaits its reaper, init)
    assert [proc for proc, fields in group_members(fake) if fields[0] != "Z"] == []


def test_a_second_signal_kills_a_vllm_that_does_not_stop(tmp_path: Path) -> None:
    for child, fake, engine in _serve(tmp_path, stubborn=True):
        assert child.stdout is not None
        child.send_signal(signal.SIGTERM)
        assert child.stdout.readline() == "fake vllm got SIGTERM\n"
        assert _alive(fake)  # it ignored the request; testbed still waits
        child.send_signal(signal.SIGTERM)
        _, err = child.communicate(timeout=60)
        assert child.returncode == 130
        assert "testbed: SIGTERM: vLLM killed" in err
        assert not _alive(fake)
        assert not _alive(engine)
