"""The ``load:`` section of a campaign: what traffic the load probe sends and what it expects.

One :class:`LoadProbe` describes one load test. Matrix factors address its fields by dotted
path (``load.concurrency``, ``load.rate``, ``load.dataset.input_tokens``). Every field says
its unit. Lengths are in tokens of the model's tokenizer; rates in requests per second;
times in seconds unless the name ends in ``_ms``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from testbed.config.embeddings import EmbeddingsLoad, check_endpoint
from testbed.config.lengths import (  # the others re-exported: they were defined here
    FixedLength,
    Length,
    ListLength,  # noqa: F401
    NormalLength,  # noqa: F401
    UniformLength,  # noqa: F401
    length_shorthand,
)
from testbed.config.server_metrics import ServerMetrics
from testbed.config.shaping import (
    ModelShare,
    check_extra_body,
    check_headers,
    models_shorthand,
)
from testbed.config.stages import RateStage, check_stages, stages_shorthand
from testbed.config.workload import SessionDataset, TraceDataset, check_workload

#: How long a stage runs when neither ``duration_s`` nor ``requests`` bounds it (s).
DEFAULT_DURATION_S = 10.0


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True, allow_inf_nan=False)


# -- datasets -------------------------------------------------------------------------------


class SyntheticDataset(_Strict):
    """Generated prompts with exact token lengths (measured with the model's tokenizer, or
    the simulator's rule), optionally sharing a prefix within groups."""

    kind: Literal["synthetic"] = "synthetic"
    input_tokens: Length = Field(
        default_factory=lambda: FixedLength(value=128),
        description="Prompt length (tokens); an integer means fixed.",
    )
    output_tokens: Length = Field(
        default_factory=lambda: FixedLength(value=64),
        description="Requested output length, sent as max_tokens (tokens).",
    )
    prefix_tokens: int = Field(
        0, ge=0, description="Shared prefix length at the start of each prompt (tokens)."
    )
    prefix_groups: int = Field(
        1, ge=1, description="Distinct shared prefixes; prompts cycle through the groups."
    )
    samples: int = Field(
        1000, ge=1, description="Distinct prompts generated; requests cycle through them."
    )

    @field_validator("input_tokens", "output_tokens", mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        return length_shorthand(value)


class FileDataset(_Strict):
    """Prompts from a local file: JSON lines with a ``prompt`` field (optionally
    ``output_tokens``), or ShareGPT-style conversations (first human turn is the prompt, the
    first model turn's length is the output length)."""

    kind: Literal["file"]
    path: str = Field(
        description="Path of the file, relative to the campaign file"
        " (`testbed load --dataset`: to the working directory)."
    )
    format: Literal["jsonl", "sharegpt"] = Field("jsonl", description="File format.")
    output_tokens: Length | None = Field(
        None, description="Override the output length of every prompt (tokens)."
    )
    limit: int | None = Field(None, ge=1, description="Use at most this many prompts.")
    shuffle: bool = Field(True, description="Shuffle the prompts with the probe's seed.")

    @field_validator("output_tokens", mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        return length_shorthand(value)


Dataset = Annotated[
    SyntheticDataset | FileDataset | SessionDataset | TraceDataset, Field(discriminator="kind")
]


# -- profiles -------------------------------------------------------------------------------


class SweepSettings(_Strict):
    """Sweep: a synchronous stage, a saturation stage (``max_concurrency`` in flight), then
    ``rates`` open-loop stages evenly spaced strictly between the two throughputs."""

    rates: int = Field(6, ge=1, description="Rate stages between synchronous and saturation.")
    max_concurrency: int = Field(
        64, ge=1, description="Requests in flight in the saturation stage."
    )


class RampSettings(_Strict):
    """Ramp: the arrival rate goes linearly from ``start_rate`` to ``end_rate`` over the
    stage's duration (open loop)."""

    start_rate: float = Field(1.0, gt=0, description="Rate at the start (requests/s).")
    end_rate: float = Field(10.0, gt=0, description="Rate at the end (requests/s).")


class Slo(_Strict):
    """Service-level objectives. Percentile fields judge the whole steady-state window
    (verdict); a request counts toward goodput when its own TTFT, ITLs, TPOT and e2e are
    each within the same thresholds."""

    ttft_p99_ms: float | None = Field(None, gt=0, description="TTFT p99 bound (ms).")
    itl_p99_ms: float | None = Field(None, gt=0, description="ITL p99 bound (ms).")
    tpot_p99_ms: float | None = Field(None, gt=0, description="TPOT p99 bound (ms).")
    e2e_p99_ms: float | None = Field(None, gt=0, description="End-to-end p99 bound (ms).")
    min_success_ratio: float = Field(
        1.0, ge=0, le=1, description="Fraction of requests that must succeed (0..1)."
    )


class SelfCheck(_Strict):
    """When the harness's own numbers make a run untrustworthy (verdict INCONCLUSIVE)."""

    max_lag_p99_ms: float = Field(
        5.0, gt=0, description="Schedule lag p99 above this is harness overload (ms)."
    )
    min_rate_ratio: float = Field(
        0.95, gt=0, le=1, description="Achieved/requested rate below this is a shortfall."
    )
    max_cpu_fraction: float = Field(
        0.9, gt=0, le=1, description="Generator CPU / wall time above this is saturation."
    )


class LoadProbe(_Strict):
    """A load test against one endpoint."""

    deployments: list[str] | None = Field(
        None, description="Run only against these deployments (default: every one)."
    )
    profile: Literal["synchronous", "concurrency", "rate", "sweep", "ramp", "trace"] = Field(
        "concurrency",
        description="synchronous: one at a time; concurrency: N in flight (closed loop);"
        " rate: open-loop arrivals; sweep: synchronous, saturation and rates between;"
        " ramp: open-loop rate rising linearly; trace: a trace dataset's own send times.",
    )
    concurrency: int = Field(1, ge=1, description="Requests in flight (closed loop).")
    rate: float | None = Field(None, gt=0, description="Mean arrival rate (requests/s).")
    arrival: Literal["constant", "poisson", "gamma"] = Field(
        "poisson", description="Open-loop inter-arrival distribution."
    )
    gamma_shape: float = Field(
        1.0,
        gt=0,
        description="Shape k of gamma inter-arrivals (coefficient of variation 1/sqrt(k)).",
    )
    sweep: SweepSettings = Field(default_factory=SweepSettings)
    ramp: RampSettings = Field(default_factory=RampSettings)
    duration_s: float | None = Field(
        None,
        gt=0,
        description="Issue requests for this long at most, per stage (s); unset: until"
        f" `requests` have run, or {DEFAULT_DURATION_S:g} s when `requests` is unset too.",
    )
    requests: int | None = Field(
        None,
        ge=1,
        description="Run exactly this many, per stage (a `duration_s` that ends the stage"
        " first makes it INCONCLUSIVE).",
    )
    warmup_s: float = Field(0.0, ge=0, description="Excluded from statistics at start (s).")
    cooldown_s: float = Field(0.0, ge=0, description="Excluded from statistics at end (s).")
    timeout_s: float = Field(60.0, gt=0, description="Per-request timeout (s).")
    max_in_flight: int = Field(
        1024, ge=1, description="Cap on requests in flight in open loop (requests)."
    )
    api: Literal["completions", "chat", "tgi", "tgis", "embeddings", "responses"] = Field(
        "completions",
        description="Protocol: OpenAI completions or chat, TGI over HTTP, TGIS over gRPC;"
        " OpenAI embeddings (batches of inputs) or responses (streamed like chat).",
    )
    embeddings: EmbeddingsLoad | None = Field(
        None, description="api embeddings: inputs per request, dimensions, encoding."
    )
    stream: bool = Field(True, description="Stream responses (needed for TTFT and ITL).")
    ignore_eos: bool = Field(
        True, description="Ask the server to ignore EOS so outputs have the requested length."
    )
    dataset: Dataset = Field(default_factory=SyntheticDataset)
    # after the fields its rules read (validated in order: see _stages_checked)
    stages: list[RateStage] | None = Field(
        None,
        min_length=1,
        description="Several rate stages in a row, each its own window and figures:"
        " [{rate, duration_s, requests, name}] (profile rate, implied; `rate` unset);"
        " a stage's unset duration_s/requests are the load's.",
    )
    slo: Slo | None = Field(None, description="Objectives; None means no SLO verdict.")
    selfcheck: SelfCheck = Field(default_factory=SelfCheck)
    processes: int = Field(1, ge=1, description="Load processes, each with its own event loop.")
    seed: int | None = Field(None, description="Seed for prompts and arrivals (default: run's).")
    model: str | None = Field(None, description="Model name to send (default: discovered).")
    models: list[ModelShare] | None = Field(
        None,
        min_length=1,
        description="A traffic mix over models or LoRA adapters of the one endpoint:"
        " [{name, weight}] (names alone: equal weights); each prompt goes to one of them,"
        " in exact proportions, interleaved; summary.json has figures per model.",
    )
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="HTTP headers sent with every request (gRPC metadata for tgis); a"
        " secret's (Authorization, x-api-key …) as ${env:NAME}. See docs/load.md.",
    )
    extra_body: dict[str, Any] = Field(
        default_factory=dict,
        description="Fields merged into every request's JSON body (temperature, top_p, stop,"
        " seed, logprobs …; tgi: into parameters, tgis: into params).",
    )
    keep_text: bool = Field(False, description="Keep each output text in the records.")
    plots: bool = Field(True, description="Write PNG plots into the treatment directory.")
    server_metrics: ServerMetrics = Field(
        default_factory=ServerMetrics, description="Scrape the server's Prometheus metrics."
    )

    @model_validator(mode="before")
    @classmethod
    def _stages_imply_rate(cls, data: Any) -> Any:
        """``stages:`` alone means profile rate, as a trace means profile trace."""
        if isinstance(data, dict) and data.get("stages") is not None and "profile" not in data:
            return {**data, "profile": "rate"}
        return data

    @field_validator("stages", mode="before")
    @classmethod
    def _stages_shorthand(cls, value: Any) -> Any:
        return stages_shorthand(value)

    @field_validator("stages")
    @classmethod
    def _stages_checked(
        cls, value: list[RateStage] | None, info: ValidationInfo
    ) -> list[RateStage] | None:
        """A stage list's rules, here so that an error points at ``stages:`` itself (the
        fields they read come first; one that failed is reported on its own)."""
        data = info.data
        needed = ("profile", "rate", "dataset", "duration_s", "requests", "warmup_s", "cooldown_s")
        if value is None or any(k not in data for k in needed):
            return value
        check_stages(
            value,
            data["profile"],
            data["rate"],
            data["dataset"].kind,
            (data["duration_s"], data["requests"], DEFAULT_DURATION_S),
            data["warmup_s"] + data["cooldown_s"],
        )
        return value

    @field_validator("dataset", mode="before")
    @classmethod
    def _synthetic_by_default(cls, value: Any) -> Any:
        """``dataset: {input_tokens: 256}`` needs no ``kind``: synthetic is the default."""
        if isinstance(value, dict) and "kind" not in value:
            return {"kind": "synthetic", **value}
        return value

    @field_validator("models", mode="before")
    @classmethod
    def _models_shorthand(cls, value: Any) -> Any:
        return models_shorthand(value)

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: dict[str, str]) -> dict[str, str]:
        return check_headers(value)

    @field_validator("extra_body")
    @classmethod
    def _extra_body(cls, value: dict[str, Any]) -> dict[str, Any]:
        return check_extra_body(value)

    @property
    def asks(self) -> str | None:
        """The value of this section's protocol field (``api``), which
        :func:`testbed.config.protocols.unreachable` checks against a server."""
        return self.api

    def files(self) -> list[tuple[tuple[str | int, ...], str]]:
        """The campaign's files this section reads, each with where it is named: its
        dataset's file (prompts, sessions' conversations or a trace), when it has one."""
        dataset = self.dataset
        path = None if isinstance(dataset, SyntheticDataset) else dataset.path
        return [(("load", "dataset", "path"), path)] if path else []

    @property
    def stage_duration_s(self) -> float | None:
        """What bounds each stage in time: ``duration_s`` as given; unset, nothing when
        ``requests`` counts the stage (it runs them all), else the default duration."""
        if self.duration_s is not None or self.requests is not None:
            return self.duration_s
        return DEFAULT_DURATION_S

    @model_validator(mode="after")
    def _consistent(self) -> LoadProbe:
        margins = self.warmup_s + self.cooldown_s
        check_workload(self.dataset, self.profile, self.duration_s, self.requests)
        check_endpoint(self.api, self.embeddings, self.dataset.kind, self.slo)
        if self.stages is not None:  # each stage's own bounds were checked, not the load's
            self._mix_consistent()
            return self
        if self.profile == "rate" and self.rate is None:
            raise ValueError(
                "profile 'rate' needs `rate` (requests/s), e.g. rate: 50, or `stages`"
                " (several rates in a row)"
            )
        if self.profile == "ramp" and self.stage_duration_s is None:
            raise ValueError(
                "profile 'ramp' rises over `duration_s`, which a request count cannot set:"
                " give `duration_s` too (the ramp's length, s)"
            )
        self._mix_consistent()
        duration = self.stage_duration_s
        if duration is not None and margins >= duration:
            raise ValueError(
                f"warmup_s + cooldown_s ({margins}) must be shorter than duration_s ({duration:g})"
            )
        return self

    def _mix_consistent(self) -> None:
        """A model mix names each model once, alone, over an api that names models."""
        if self.models is None:
            return
        if self.model is not None:
            raise ValueError("give `model` or `models` (a mix), not both")
        if self.api == "tgi":
            raise ValueError(
                "api tgi serves one model and names none: a `models` mix needs completions,"
                " chat or tgis"
            )
        names = [m.name for m in self.models]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"models: {', '.join(twice)} given twice — one entry per model")
