"""The ``scale:`` section: submit N workloads to a cluster and time their lifecycle."""

from __future__ import annotations

from pydantic import Field

from testbed.config.deployments import Strict


class ScaleProbe(Strict):
    """Run:ai's scale test: submit workloads from a template, sample lifecycle timestamps."""

    workloads: int = Field(10, gt=0, description="workloads submitted in all")
    parallel: int = Field(1, gt=0, description="submitted together in each iteration")
    delay_s: float = Field(0.0, ge=0, description="pause between iterations, seconds")
    template: str | None = Field(None, description="YAML template of one workload")
    namespace: str | None = Field(None, description="default: the run's namespace")
    timeout_s: float = Field(600.0, gt=0, description="wait for all to reach the last stage")
    skip_errors: bool = Field(True, description="leave failed workloads out of the plots")
    head: int | None = Field(None, gt=0, description="only the first N workloads in plots")
    tail: int | None = Field(None, gt=0, description="only the last N workloads in plots")
