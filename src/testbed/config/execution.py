"""How a plan runs: the parallelism strategy, retries and TOPSAIL's phases."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from testbed.config.deployments import Strict
from testbed.config.steps import Capture


class Phases(Strict):
    """cleanup → prepare → test → cleanup, each skippable (TOPSAIL)."""

    cleanup: bool = Field(True, description="end leftovers of an earlier interrupted run")
    prepare: bool = Field(True, description="prepare models and images before testing")
    test: bool = Field(True, description="provision workers and run the probes")
    final_cleanup: bool = Field(True, description="release everything at the end")


class Execution(Strict):
    """Parallelism strategies of the Tekton seed, applied to workers.

    ``parallel`` runs every worker at once (within ``max_parallel`` and the CPU budget),
    ``sequential`` one at a time, ``barrier`` in waves of ``max_parallel`` that all finish
    before the next wave starts, ``sliding`` keeps ``max_parallel`` running and starts the
    next as soon as one ends. ``unroll`` factors split the plan into groups, one per value
    combination, run one after the other.
    """

    strategy: Literal["parallel", "sequential", "barrier", "sliding"] = "parallel"
    max_parallel: int | None = Field(None, gt=0, description="workers at once (None = budget)")
    unroll: list[str] = Field(default_factory=list, description="matrix factors run in turn")
    fail_fast: bool = Field(False, description="stop scheduling after the first FAIL or ERROR")
    retries: int = Field(1, ge=0, description="re-runs of a treatment after an infra ERROR")
    cpu_budget: float | None = Field(None, gt=0, description="cores (default: this machine's)")
    seed: int = Field(0, description="seeds case shuffling and synthetic workloads")
    phases: Phases = Field(default_factory=Phases)
    toolbox: str = Field(
        "toolbox",
        description="folder of the named commands' scripts (group/command), relative to the"
        " campaign's folder",
    )
    capture: Capture = Field(
        default_factory=Capture, description="state and Prometheus captured around treatments"
    )
    keep: bool = Field(
        False,
        description="leave the servers and the stack running after the test (no final cleanup);"
        " `testbed cleanup DIR` removes them",
    )
