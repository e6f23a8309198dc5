"""One run as its phases see it (:class:`Run`): built once by the pipeline and passed
down to each phase, instead of the six to eight values each phase took one by one."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testbed.backends.base import Backend
from testbed.config.execution import Execution
from testbed.config.loader import LoadedCampaign
from testbed.execution.captures import Captures
from testbed.execution.events import Observer, Silent
from testbed.execution.remote_probes import shipped_campaign
from testbed.execution.stopping import StopRequests
from testbed.execution.treatment import Setting
from testbed.execution.worker_set import WorkerSetRunner
from testbed.plan.model import Plan
from testbed.results.ledger import Ledger
from testbed.results.rundir import RunDir


@dataclass
class RunOptions:
    """How a run is asked to go (the command line's choices); the pipeline takes it."""

    runs_dir: Path | None = None  # parent of new run directories (default: campaign's)
    out: Path | None = None  # an explicit run directory
    skip_phases: Iterable[str] = ()
    observer: Observer = field(default_factory=Silent)
    cpu_budget: float | None = None
    only: frozenset[str] | None = None  # run just these treatments (``testbed worker``)
    # deployment name -> URL: provision nothing, probe these (``testbed worker --endpoint``)
    endpoints: Mapping[str, str] | None = None
    record_tee: Callable[[dict[str, Any]], None] | None = None  # ``testbed worker --stream``
    no_wait: bool = False  # a shared cluster's Lease held by another run: exit 3, not wait
    #: the run directory was made for this run (not --resume): removed again should the run
    #: be refused its turn before anything ran — no folder of a run that never started
    fresh_dir: bool = False
    label: str | None = None  # --label: what this run is (recorded, shown by testbed history)
    commit: str | None = None  # --commit: the commit under test (else CI's variable, else git)


@dataclass
class Run:
    """One run as its phases see it: the campaign and its plan, the run directory and its
    ledger, the options, the stop requests, and the backend — built once, passed down."""

    loaded: LoadedCampaign
    plan: Plan
    run_dir: RunDir
    options: RunOptions
    ledger: Ledger
    skip: frozenset[str]  # the phases not run
    stops: StopRequests
    backend: Backend
    runner: WorkerSetRunner = field(init=False)  # what runs a worker set, shared by all

    def __post_init__(self) -> None:
        execution, backend = self.execution, self.backend
        # a probe Job's backend is the probe Job: it runs its probe itself and captures
        # nothing (the run's controller does)
        captures = Captures(backend, execution.capture)
        self.runner = WorkerSetRunner(
            setting=Setting(
                self.plan,
                execution.seed,
                self.loaded.base_dir,
                self.loaded.campaign.backend,
                campaign=None if backend.probe_job else shipped_campaign(self.loaded, self.plan),
                record_tee=self.options.record_tee,
            ),
            backend=backend,
            run_dir=self.run_dir,
            ledger=self.ledger,
            observer=self.observer,
            retries=execution.retries,
            fail_fast=execution.fail_fast,
            captures=captures if captures.active and not backend.probe_job else None,
        )

    @property
    def observer(self) -> Observer:
        return self.options.observer

    @property
    def execution(self) -> Execution:
        return self.loaded.campaign.execution
