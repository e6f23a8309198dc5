"""``testbed cleanup DIR``: end what a run left behind (a SIGKILLed testbed cannot stop its
servers; PR_SET_PDEATHSIG usually does, this is the sure way).

The run's own backend cleans up what it made (:meth:`Backend.cleanup_leftovers`); this
machine's process groups recorded in ``DIR/pids/*.json`` (local servers, any run's steps)
are ended when those very processes still run — by the backend when it says it does
(``ends_local_processes``), else here. When the resolved campaign cannot be loaded any
more, the recorded process groups are still ended.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from testbed.backends.base import Backend
from testbed.config.loader import LoadedCampaign
from testbed.core.errors import TestbedError
from testbed.core.processes import kill_leftovers
from testbed.results.rundir import PID_DIR, RESOLVED, RunDir


@dataclass
class Cleanup:
    ended: list[str] = field(default_factory=list)  # one line per thing ended
    notes: list[str] = field(default_factory=list)


async def cleanup_run(path: Path) -> Cleanup:
    """End leftovers of the run in ``path``."""
    run_dir = RunDir.existing(path)
    from testbed.config.loader import load_campaign
    from testbed.execution.pipeline import make_backend

    done = Cleanup()
    backend: Backend | None = None
    try:
        loaded = load_campaign(run_dir.path / RESOLVED)
        loaded.base_dir = Path(run_dir.metadata().get("base_dir", "."))
        backend = make_backend(loaded, run_dir)
    except TestbedError as exc:
        done.notes.append(f"campaign not loadable ({exc}); ending local leftovers only")
    else:  # the user's final cleanup steps that have not run yet (execution.keep, a crash)
        done.ended += await _final_steps(loaded, run_dir, backend)
        done.ended += await backend.cleanup_leftovers(run_dir.path)
    if backend is None or not backend.ends_local_processes:
        done.ended += kill_leftovers(run_dir.path / PID_DIR)
    return done


async def _final_steps(loaded: LoadedCampaign, run_dir: RunDir, backend: Backend) -> list[str]:
    """Run the campaign's final cleanup steps that did not finish ok; say what ran."""
    from testbed.execution.events import Silent
    from testbed.execution.steps.session import make_runner

    lines: list[str] = []

    class Say(Silent):
        def phase(self, name: str, detail: str = "") -> None:
            if detail.endswith(("started", "earlier attempt")):
                return
            lines.append(f"{name}: {detail}")

    steps, runner = make_runner(loaded, run_dir, backend, Say(), resume=True)
    await runner.run_stage(steps, "final_cleanup")
    return lines
