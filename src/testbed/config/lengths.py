"""Token length distributions: how many tokens a prompt, an answer or a session's turns have.

Shared by the ``load:`` section's datasets (:mod:`testbed.config.load`) and its workloads of
sessions (:mod:`testbed.config.workload`). A bare integer means a fixed length and a list of
integers a uniform choice among them (:func:`length_shorthand`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True, allow_inf_nan=False)


class FixedLength(_Strict):
    """Every request has exactly ``value`` tokens."""

    kind: Literal["fixed"] = "fixed"
    value: int = Field(ge=1, description="Tokens.")


class UniformLength(_Strict):
    """A length drawn uniformly from ``[min, max]`` (inclusive)."""

    kind: Literal["uniform"]
    min: int = Field(ge=1, description="Smallest length (tokens).")
    max: int = Field(ge=1, description="Largest length (tokens).")

    @model_validator(mode="after")
    def _ordered(self) -> UniformLength:
        if self.max < self.min:
            raise ValueError(f"uniform length: max ({self.max}) is below min ({self.min})")
        return self


class NormalLength(_Strict):
    """A length drawn from N(mean, std), rounded, clipped to ``[min, max]``."""

    kind: Literal["normal"]
    mean: float = Field(gt=0, description="Mean length (tokens).")
    std: float = Field(ge=0, description="Standard deviation (tokens).")
    min: int = Field(1, ge=1, description="Clip below at this length (tokens).")
    max: int | None = Field(None, ge=1, description="Clip above at this length (tokens).")


class ListLength(_Strict):
    """A length drawn uniformly from the given ``values``."""

    kind: Literal["list"]
    values: list[Annotated[int, Field(ge=1)]] = Field(min_length=1, description="Lengths (tokens).")


Length = Annotated[
    FixedLength | UniformLength | NormalLength | ListLength, Field(discriminator="kind")
]


def length_shorthand(value: Any) -> Any:
    """A bare integer means a fixed length; a list of integers means ``kind: list``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return {"kind": "fixed", "value": value}
    if isinstance(value, list):
        return {"kind": "list", "values": value}
    return value
