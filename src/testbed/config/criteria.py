"""The ``criteria:`` section: verdicts that compare treatments of one run with each other.

A load probe judges one treatment against its SLOs; an experiment such as llm-d's
inference-scheduling asks which *level of a factor* is better. A criterion names a metric, a
baseline treatment and candidate treatments (each chosen by matrix factor values), and the
margin by which every candidate must beat the baseline::

    criteria:
      - name: smarter pickers beat random
        metric: ttft_ms.p90                                  # a load metric, by its name
        baseline: {deployments.scheduling.values.epp_config: random}
        candidates:
          - {deployments.scheduling.values.epp_config: load-aware}
          - {deployments.scheduling.values.epp_config: prefix-aware}
        better_by: 10%                                       # or an absolute value (ms)

It is judged on the bootstrap interval of the change (:mod:`testbed.report.criteria`); the
run's status includes it, and the report shows each comparison with its interval.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator


class Criterion(BaseModel):
    """Every candidate treatment must beat the baseline treatment on ``metric``."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, description="what the criterion checks, in words")
    metric: str = Field(
        # a stage's name (stages.rate-8.ttft_ms.p50) may hold capitals, - and +
        pattern=r"^[a-z_]+(\.[A-Za-z0-9_.+-]+)+$",
        description="a load metric of the treatment summaries, e.g. ttft_ms.p90, e2e_ms.mean,"
        " throughput.output_tokens_per_s, stages.rate-8.ttft_ms.p50 (one stage's)",
    )
    baseline: dict[str, Any] = Field(
        min_length=1, description="matrix factor values that choose the baseline treatment"
    )
    candidates: list[dict[str, Any]] = Field(
        min_length=1, description="factor values choosing each candidate treatment"
    )
    better_by: str | float = Field(
        0.0,
        description="the margin: '10%' (relative to the baseline) or a number in the metric's"
        " unit; 0 means any significant improvement",
    )
    confidence: float = Field(0.95, gt=0.5, lt=1, description="level of the bootstrap interval")

    @field_validator("better_by")
    @classmethod
    def _margin(cls, value: str | float) -> str | float:
        if isinstance(value, str):
            text = value.strip()
            number = text[:-1] if text.endswith("%") else text
            try:
                if float(number) < 0:
                    raise ValueError
            except ValueError:
                raise ValueError(
                    f"better_by {value!r}: a non-negative number or percentage, e.g. 10%"
                ) from None
            return text
        if value < 0:
            raise ValueError(f"better_by {value}: must not be negative")
        return value

    @property
    def relative(self) -> bool:
        return isinstance(self.better_by, str) and self.better_by.endswith("%")

    @property
    def margin(self) -> float:
        """The margin as a fraction (relative) or in the metric's unit."""
        if isinstance(self.better_by, str):
            text = self.better_by
            return float(text[:-1]) / 100 if text.endswith("%") else float(text)
        return float(self.better_by)
