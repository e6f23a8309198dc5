"""The ``correctness:`` section: golden case files and the cross-configuration differential."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from testbed.config.deployments import Strict


class Tolerance(Strict):
    """Approximate comparison of floats (logprobs): tight by default, like TGIS's own 5e-4."""

    rel: float = Field(5e-4, ge=0, description="relative tolerance")
    abs: float = Field(5e-4, ge=0, description="absolute tolerance")


class CorrectnessProbe(Strict):
    """Run case files against each deployment and compare with expected outputs."""

    deployments: list[str] | None = Field(
        None, description="run only against these deployments (default: every one)"
    )
    cases: list[str] = Field(
        min_length=1, description="case files (YAML), relative to the campaign"
    )
    protocol: Literal["openai", "tgi", "both"] = "openai"
    streaming_twins: bool = Field(True, description="check a streaming twin of each unary case")
    concurrency: int = Field(4, gt=0, description="cases in flight at once")
    shuffle: bool = Field(True, description="run cases in a random order (seed recorded)")
    tolerance: Tolerance = Field(default_factory=Tolerance)
    reference: str | None = Field(None, description="deployment the others are diffed against")
    near_tie_nats: float = Field(0.05, ge=0, description="logprob margin of a numerical near-tie")
    timeout_s: float = Field(120.0, gt=0, description="per request")
