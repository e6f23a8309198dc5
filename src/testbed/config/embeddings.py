"""The ``load.embeddings`` settings, and what the endpoints beyond generation ask of a load.

``api: embeddings`` sends the dataset's prompts as the inputs of ``/v1/embeddings`` requests,
``batch_size`` of them per request (a length distribution: a fixed count, or drawn per
request); ``dimensions`` and ``encoding_format`` are sent as given. An embeddings answer is
one body, so only end-to-end latency exists: an SLO on TTFT, ITL or TPOT judges nothing
there and is refused, as are workloads of conversations (sessions, traces of turns).

``api: responses`` (``/v1/responses``, streamed) is measured as chat is; it needs nothing
more here.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from testbed.config.lengths import FixedLength, Length, length_shorthand

#: The load apis that address an OpenAI endpoint beyond completions and chat, by the name
#: a server kind lists them with (:attr:`testbed.config.server_kinds.ServerKind.endpoints`).
ENDPOINTS = ("embeddings", "responses")


class EmbeddingsLoad(BaseModel):
    """How ``api: embeddings`` shapes its requests."""

    model_config = ConfigDict(extra="forbid", validate_default=True, allow_inf_nan=False)

    batch_size: Length = Field(
        default_factory=lambda: FixedLength(value=1),
        description="Inputs per request (the dataset's prompts, in turn); an integer means"
        " fixed, a distribution is drawn per request.",
    )
    dimensions: int | None = Field(
        None, ge=1, description="Vector length to ask for (`dimensions`); unset: the model's."
    )
    encoding_format: Literal["float", "base64"] = Field(
        "float", description="float: JSON numbers; base64: little-endian float32 bytes."
    )

    @field_validator("batch_size", mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        return length_shorthand(value)


#: The SLO fields an embeddings answer cannot be judged by (it streams nothing).
_STREAMED_SLO = ("ttft_p99_ms", "itl_p99_ms", "tpot_p99_ms")


def check_endpoint(
    api: str, embeddings: EmbeddingsLoad | None, dataset_kind: str, slo: Any
) -> None:
    """The load section's rules for the endpoints beyond generation (ValueError for
    pydantic, naming the field and the fix)."""
    if embeddings is not None and api != "embeddings":
        raise ValueError(
            f"`embeddings` shapes api embeddings requests, but api is {api!r}:"
            " set api: embeddings, or leave `embeddings` out"
        )
    if api != "embeddings":
        return
    if dataset_kind not in ("synthetic", "file"):
        raise ValueError(
            f"api embeddings sends prompts, not conversations: dataset kind {dataset_kind!r}"
            " is not played — use a synthetic or file dataset"
        )
    streamed = [f for f in _STREAMED_SLO if slo is not None and getattr(slo, f) is not None]
    if streamed:
        raise ValueError(
            f"slo.{streamed[0]}: an embeddings answer is one body, with no first token or"
            " gaps to time — bound slo.e2e_p99_ms instead"
        )
