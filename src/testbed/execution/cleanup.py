"""``testbed cleanup DIR``: end what a run left behind (a SIGKILLed testbed cannot stop its
servers; PR_SET_PDEATHSIG usually does, this is the sure way).

The run's own backend cleans up (the local backend ends the process groups recorded in
``DIR/pids/*.json`` when those very processes still run). When the resolved campaign cannot
be loaded any more, the local pid files are still honoured.
"""

from __future__ import annotations

from pathlib import Path

from testbed.core.errors import TestbedError
from testbed.results.rundir import RESOLVED, RunDir


async def cleanup_run(path: Path) -> list[str]:
    """End leftovers of the run in ``path``; one line per thing ended."""
    run_dir = RunDir.existing(path)
    from testbed.backends.local import LocalBackend
    from testbed.config.loader import load_campaign
    from testbed.execution.pipeline import make_backend

    lines: list[str] = []
    try:
        loaded = load_campaign(run_dir.path / RESOLVED)
        backend = make_backend(loaded, run_dir)
    except TestbedError as exc:
        lines.append(f"campaign not loadable ({exc}); ending local leftovers only")
        backend = LocalBackend(run_dir.path)
    lines += await backend.cleanup_leftovers(run_dir.path)
    if not isinstance(backend, LocalBackend):
        lines += await LocalBackend(run_dir.path).cleanup_leftovers(run_dir.path)
    return lines
