"""The ``ab:`` section: stable versus canary, paired, with a verdict and its evidence."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from testbed.config.deployments import Strict


class AbCriteria(Strict):
    """What the canary must show to PASS."""

    min_agreement: float = Field(0.95, ge=0, le=1, description="fraction of equal outputs")
    max_ttft_p50_regression: float = Field(0.10, ge=0, description="relative, 0.10 = 10 %")
    max_e2e_p50_regression: float | None = Field(None, ge=0, description="relative")
    max_error_rate_increase: float = Field(0.01, ge=0, description="absolute fraction")
    min_samples: int = Field(30, gt=0, description="pairs below which the verdict is INCONCLUSIVE")
    confidence: float = Field(0.95, gt=0, lt=1, description="level of intervals and tests")


class AbProbe(Strict):
    """Send the same prompts to two deployments and compare them."""

    stable: str = Field(description="deployment name")
    canary: str = Field(description="deployment name")
    prompts: str | None = Field(None, description="JSONL file of prompts (default: synthetic)")
    requests: int = Field(60, gt=0, description="prompts sent to each side")
    mode: Literal["paired", "split"] = "paired"
    split: float = Field(0.5, gt=0, lt=1, description="canary share in split mode")
    concurrency: int = Field(4, gt=0)
    rate: float | None = Field(None, gt=0, description="requests/s (open loop) instead")
    max_tokens: int = Field(32, gt=0)
    api: Literal["completions", "chat"] = "completions"
    similarity: Literal["exact", "embedding"] = "exact"
    similarity_threshold: float = Field(0.9, ge=0, le=1)
    criteria: AbCriteria = Field(default_factory=AbCriteria)

    @model_validator(mode="after")
    def _distinct(self) -> AbProbe:
        if self.stable == self.canary:
            raise ValueError(f"stable and canary are both '{self.stable}' — name two deployments")
        return self
