"""The simulator as a child process (its own core and event loop): ``testbed serve sim``
on a free port, stopped when the context ends. Used by ``testbed calibrate`` and tests."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator

from testbed.core.errors import ServerStartError


@contextlib.contextmanager
def sim_process(*flags: str) -> Iterator[str]:
    """``testbed serve sim --port 0 FLAGS`` as a child; yields its URL; stops it after."""
    child = subprocess.Popen(
        [sys.executable, "-m", "testbed", "serve", "sim", "--port", "0", *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert child.stdout is not None
        line = ""
        # Lines before the listening line (warnings) are skipped; EOF means it died.
        while "listening on" not in line:
            line = child.stdout.readline()
            if not line and child.poll() is not None:
                raise ServerStartError(f"the simulator exited with code {child.returncode}")
        yield line.rsplit(" ", 1)[-1].strip()
    finally:
        child.terminate()
        try:
            child.wait(timeout=5)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()
