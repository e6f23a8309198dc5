"""The container shim: runs a container's command, takes its whole group down with the emulator.

The kubelet starts ``python -I shim.py ARGV…`` as the leader of a new process group. The
shim starts ARGV in the same group and waits for it, exiting with its status (128 + N for
a death by signal N, as container runtimes report it). The kernel sends the shim SIGTERM
when the emulator dies (``PR_SET_PDEATHSIG``); seeing its parent gone, the shim SIGKILLs
its whole group, so even the grandchildren a server spawned (vLLM's engine processes) do
not outlive an emulator that was SIGKILLed. A SIGTERM while the emulator lives came to the
whole group from the kubelet and is left to the container.

Standard library only, run by path with ``-I``: it starts in milliseconds and imports
nothing of testbed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys

_PR_SET_PDEATHSIG = 1


def main(argv: list[str]) -> int:
    parent = os.getppid()

    def orphaned() -> bool:
        return os.getppid() != parent

    def on_term(signum: int, frame: object) -> None:
        del signum, frame
        if orphaned():
            os.killpg(0, signal.SIGKILL)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if orphaned():  # the emulator died before the death signal was armed
        os.killpg(0, signal.SIGKILL)
    try:
        child = subprocess.Popen(argv, preexec_fn=_default_signals)  # noqa: PLW1509
    except OSError as exc:
        sys.stderr.write(f"exec {argv[0]!r}: {exc.strerror}\n")
        return 128
    code = child.wait()
    return 128 - code if code < 0 else code


def _default_signals() -> None:
    """The container must not inherit the shim's signal dispositions."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
