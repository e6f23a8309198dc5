"""The steps of one run, opened for the pipeline: rendered with the run's own values, the
plan written to ``steps/plan.json``, and each stage run on demand.

``--resume`` skips the steps whose folder says ``ok`` — unless the earlier attempt got as
far as its final cleanup (after an error or Ctrl-C it always does): that cleanup undid what
the prepare steps made, so every step runs again (their earlier outputs kept in
``attempts/``).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass

from testbed.backends.base import Backend
from testbed.config.loader import LoadedCampaign
from testbed.config.templating import PlannedStep
from testbed.core.processes import kill_leftover
from testbed.execution.events import Observer
from testbed.execution.steps import planned_steps
from testbed.execution.steps.runner import StepRunner
from testbed.results.rundir import PID_DIR, RunDir
from testbed.results.steps import STEPS_PLAN, read_step, steps_dir


@dataclass
class StepSession:
    steps: list[PlannedStep]
    runner: StepRunner

    @classmethod
    def open(
        cls,
        loaded: LoadedCampaign,
        run_dir: RunDir,
        backend: Backend,
        observer: Observer,
        skip: set[str],
        enabled: bool = True,
    ) -> StepSession:
        for pid_file in sorted((run_dir.path / PID_DIR).glob("step-*.json")):
            # a step of an earlier attempt killed with testbed (SIGKILL): end its group
            message = kill_leftover(pid_file)
            if message:
                observer.phase("cleanup", message)
        planned = steps_dir(run_dir.path) / STEPS_PLAN
        steps, runner = make_runner(loaded, run_dir, backend, observer, resume=planned.is_file())
        if not enabled:
            steps = []
        # after a final cleanup (it undid prepare) nothing earlier can be trusted: all again
        runner.resume = runner.resume and not any(
            read_step(steps_dir(run_dir.path) / s.dirname)
            for s in steps
            if s.stage == "final_cleanup"
        )
        if steps:
            runner.write_plan(steps, skip)
        return cls(steps, runner)

    async def stage(self, stage: str) -> bool:
        """Run ``stage``'s steps; False when one failed and the run must stop."""
        return await self.runner.run_stage(self.steps, stage)

    @property
    def failure(self) -> str:
        return self.runner.failure


def make_runner(
    loaded: LoadedCampaign, run_dir: RunDir, backend: Backend, observer: Observer, resume: bool
) -> tuple[list[PlannedStep], StepRunner]:
    """The run's steps rendered with its own values, and a runner with the children's
    environment (the run's, the backend's)."""
    env = backend.step_env()
    run = {
        "id": run_dir.run_id,
        "dir": str(run_dir.path.resolve()),
        "namespace": env.get("NAMESPACE", ""),
    }
    runner = StepRunner(
        run_dir.path,
        loaded.base_dir,
        observer,
        env={**env, "TESTBED_RUN_ID": run_dir.run_id, "TESTBED_RUN_DIR": run["dir"]},
        capture=functools.partial(
            backend.capture_state,
            workers=None,
            namespaces=loaded.campaign.execution.capture.namespaces,
        ),
        resume=resume,
        references=(json.dumps(loaded.document),),
    )
    return planned_steps(loaded, run), runner
