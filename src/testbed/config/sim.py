"""Parameters of the built-in inference simulator (``server: sim``, ``testbed serve sim``).

Every knob of the simulator is a field here, documented with its unit, so a campaign can sweep
any of them in a matrix (``deployment.params.itl_ms``) and the simulator's ground truth is
known exactly. The generic server fields (dtype, max_model_len, max_batch_size,
tensor_parallel) exist so that a matrix written for real servers also runs on the simulator.

Tokenization rule (the simulator has no real tokenizer; ``/tokenize`` and ``usage`` agree):

- ``whitespace`` (default): one token per whitespace-separated word of the prompt;
- ``chars4``: one token per started group of 4 characters (``ceil(len(text) / 4)``).

Generated tokens are always one space plus three lowercase letters (`` bax``), so a generated
text of N tokens counts as N tokens under either rule. Chat prompts count the tokens of every
message's content, nothing for roles or templates.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Jitter(_Strict):
    """Random variation added to every time to first token and inter-token gap.

    ``fixed`` adds nothing. ``normal`` adds N(0, scale); ``uniform`` adds U(-scale, +scale);
    ``exponential`` adds Exp with mean ``scale`` (a right tail, like real servers). A delay
    never goes below zero. Draws come from the simulator's seeded generator.
    """

    distribution: Literal["fixed", "normal", "uniform", "exponential"] = "fixed"
    ttft_scale_ms: float = Field(default=0.0, ge=0, description="Scale for TTFT draws (ms).")
    itl_scale_ms: float = Field(default=0.0, ge=0, description="Scale for each ITL draw (ms).")


class Faults(_Strict):
    """Fault injection; each rate is the probability (0..1) that one request suffers it."""

    error_rate: float = Field(
        default=0.0, ge=0, le=1, description="Answer with ``error_status`` instead of serving."
    )
    error_status: int = Field(default=500, ge=400, le=599, description="HTTP status for errors.")
    disconnect_rate: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="Close the connection half-way through a streamed response (no [DONE]).",
    )
    malformed_rate: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="Replace one streamed event with a truncated, unparsable JSON chunk.",
    )
    corrupt_rate: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="Return a different (wrong but well-formed) text of the same length.",
    )
    slow_start_s: float = Field(
        default=0.0,
        ge=0,
        description="Seconds after start during which /health and inference answer 503.",
    )


class SimModel(_Strict):
    """A further model name the simulator serves beside ``model_name`` (a LoRA adapter,
    another model behind one endpoint), with its own latency: a field left unset takes
    the top level's value."""

    ttft_ms: float | None = Field(default=None, ge=0, description="Base TTFT (ms).")
    itl_ms: float | None = Field(default=None, ge=0, description="Base ITL (ms).")
    ttft_per_prompt_token_ms: float | None = Field(
        default=None, ge=0, description="Added to TTFT per prompt token (ms/token)."
    )
    ttft_per_running_ms: float | None = Field(
        default=None, ge=0, description="Added to TTFT per other running request (ms)."
    )
    itl_per_running_ms: float | None = Field(
        default=None, ge=0, description="Added to each ITL per other running request (ms)."
    )


class SimParams(_Strict):
    """Every knob of the simulator; the defaults answer instantly and never fail."""

    # -- identity and output
    model_name: str = Field(default="sim-model", min_length=1, description="Served model name.")
    seed: int = Field(default=0, description="Seeds output text, jitter and fault draws.")
    default_output_tokens: int = Field(
        default=64, ge=1, description="Tokens generated when a request gives no max_tokens."
    )
    eos_rate: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="Fraction of prompts (chosen deterministically from seed and prompt) that"
        " stop early at a deterministic position with finish_reason 'stop', unless the request"
        " sets ignore_eos.",
    )
    models: dict[str, SimModel] = Field(
        default_factory=dict,
        description="Further served names (LoRA adapters) → their latency, e.g. {a: {ttft_ms:"
        " 20}}; listed at /v1/models with model_name as parent. A request naming any other"
        " model is answered 404, as vLLM answers it.",
    )
    log_requests: bool = Field(
        default=False,
        description="One line per request on standard output: 'request <x-request-id> <method>"
        " <path>' (the gRPC metadata's x-request-id for TGIS; '-' when the client sent none),"
        " the line a client's record joins by its request id.",
    )
    tokenizer: Literal["whitespace", "chars4"] = Field(
        default="whitespace", description="Token counting rule (see the module docstring)."
    )
    vocab_size: int = Field(
        default=2000,
        ge=10,
        le=2205,
        description="Distinct generated tokens (consonant-vowel-consonant words, at most 2205).",
    )

    # -- latency model (ground truth the probes measure against)
    ttft_ms: float = Field(default=0.0, ge=0, description="Base time to first token (ms).")
    itl_ms: float = Field(default=0.0, ge=0, description="Base inter-token latency (ms).")
    ttft_per_prompt_token_ms: float = Field(
        default=0.0, ge=0, description="Added to TTFT per prompt token (ms/token)."
    )
    ttft_per_running_ms: float = Field(
        default=0.0,
        ge=0,
        description="Added to TTFT per other request running when this one starts (ms/request).",
    )
    itl_per_running_ms: float = Field(
        default=0.0,
        ge=0,
        description="Added to each ITL per other request running at that token (ms/request).",
    )
    jitter: Jitter = Field(default_factory=Jitter)
    # /v1/embeddings: one answer per request, after a per-request + per-token latency
    embedding_ms: float = Field(
        default=0.0, ge=0, description="Base latency of an embeddings request (ms)."
    )
    embedding_per_token_ms: float = Field(
        default=0.0, ge=0, description="Added per input token of the request (ms/token)."
    )
    embedding_dimensions: int = Field(
        default=384, ge=1, le=65536, description="Length of an embedding vector (dimensions)."
    )

    # -- admission
    max_concurrency: int | None = Field(
        default=None, ge=1, description="Requests served at once; None means unlimited."
    )
    max_waiting: int | None = Field(
        default=None,
        ge=0,
        description="Requests queued beyond max_concurrency (None: unlimited); more get 503.",
    )

    # -- KV cache (off by default: admission is by max_concurrency alone)
    kv_cache_tokens: int | None = Field(
        default=None,
        ge=1,
        description="KV-cache capacity (tokens): a request holds its prompt + output tokens"
        " (in whole blocks) while it runs, and waits while they do not fit; None: unlimited.",
    )
    block_size: int = Field(
        default=16, ge=1, description="Tokens per KV-cache block (vLLM's --block-size)."
    )
    prefix_caching: bool = Field(
        default=False,
        description="Keep finished requests' full prompt blocks cached (LRU within"
        " kv_cache_tokens); a prompt's cached leading blocks skip prefill. Needs"
        " kv_cache_tokens (vLLM's --enable-prefix-caching).",
    )

    faults: Faults = Field(default_factory=Faults)

    # -- front doors
    protocols: tuple[Literal["openai", "tgi", "tgis"], ...] = Field(
        default=("openai", "tgi"),
        min_length=1,
        description="Inference protocols served: openai and tgi over HTTP (generation routes"
        " of the others answer 404), tgis (fmaas.GenerationService) over gRPC on the gRPC"
        " port (`testbed serve sim --grpc-port`; needs the tgis extra).",
    )
    openai_prefix: str = Field(
        default="",
        pattern=r"^(/[A-Za-z0-9._~-]+)*$",
        description="Path the OpenAI routes (/v1/completions, /v1/chat/completions,"
        " /v1/models) and /tokenize are served under, e.g. /openai as KServe's model server"
        " serves them (its KSERVE_OPENAI_ROUTE_PREFIX); '' (default): at the root, as vLLM"
        " serves them. /health and /metrics stay at the root.",
    )

    # -- generic server fields, accepted so a matrix over real servers also runs here
    dtype: str = Field(
        default="float32", description="Reported as model_dtype at /info; changes nothing else."
    )
    max_model_len: int | None = Field(
        default=None,
        ge=1,
        description="Prompt + max_tokens above this is rejected with 400, as vLLM does.",
    )
    max_batch_size: int | None = Field(
        default=None, ge=1, description="Acts as a cap on max_concurrency (requests)."
    )
    tensor_parallel: int = Field(
        default=1,
        ge=1,
        description="A label of the treatment (the simulator has one shard); changes nothing.",
    )
    not_played: tuple[str, ...] = Field(
        default=(),
        description="Flags of the server this simulator stands in for that it does not play"
        " (the emulator's vLLM stand-in sets it); shown on /metrics as"
        " testbed_sim:not_played_info, so a run's server metrics name them.",
    )

    @model_validator(mode="after")
    def _models_apart(self) -> SimParams:
        if self.model_name in self.models:
            raise ValueError(
                f"models: {self.model_name!r} is model_name itself; name the further models"
            )
        return self

    def for_model(self, name: str | None) -> SimParams:
        """These parameters as model ``name`` is served (its own latency over the top
        level's); the top level's for model_name, or no name."""
        own = self.models.get(name or "")
        if own is None:
            return self
        return self.model_copy(update=own.model_dump(exclude_none=True))

    @model_validator(mode="after")
    def _queue_needs_limit(self) -> SimParams:
        unbounded = self.effective_concurrency is None and self.kv_cache_tokens is None
        if self.max_waiting is not None and unbounded:
            raise ValueError(
                "max_waiting needs max_concurrency (or max_batch_size, or kv_cache_tokens)"
                " to be set"
            )
        if self.prefix_caching and self.kv_cache_tokens is None:
            raise ValueError(
                "prefix_caching needs kv_cache_tokens (the capacity cached blocks are evicted"
                " within), e.g. kv_cache_tokens: 16384"
            )
        if self.kv_cache_tokens is not None and self.kv_cache_tokens < self.block_size:
            raise ValueError(
                f"kv_cache_tokens ({self.kv_cache_tokens}) is less than one block"
                f" (block_size {self.block_size})"
            )
        return self

    @property
    def effective_concurrency(self) -> int | None:
        """Requests served at once: the smaller of max_concurrency and max_batch_size."""
        limits = [v for v in (self.max_concurrency, self.max_batch_size) if v is not None]
        return min(limits) if limits else None

    @property
    def instant(self) -> bool:
        """True when every delay is zero, every served model's too: responses are written
        in one go."""
        return self._own_instant and all(self.for_model(name)._own_instant for name in self.models)

    @property
    def _own_instant(self) -> bool:
        return (
            self.ttft_ms == 0
            and self.itl_ms == 0
            and self.ttft_per_prompt_token_ms == 0
            and self.ttft_per_running_ms == 0
            and self.itl_per_running_ms == 0
            and (
                self.jitter.distribution == "fixed"
                or self.jitter.ttft_scale_ms == self.jitter.itl_scale_ms == 0
            )
        )

    def cli_overrides(self) -> list[str]:
        """``--set`` arguments for ``testbed serve sim`` that reproduce these parameters.

        Only fields that differ from the defaults are listed (dotted keys for nested ones);
        values are JSON, which the CLI reads as YAML.
        """
        out: list[str] = []
        for key, value in _flatten(self.model_dump(exclude_defaults=True)):
            out += ["--set", f"{key}={json.dumps(value)}"]
        return out


def _flatten(data: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    items: list[tuple[str, Any]] = []
    for key, value in data.items():
        if isinstance(value, dict):
            items += _flatten(value, f"{prefix}{key}.")
        else:
            items.append((f"{prefix}{key}", value))
    return items
