"""The base of every campaign model: unknown fields are errors, never silently ignored."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    """Base of every campaign model: unknown fields are errors, not silently ignored."""

    model_config = ConfigDict(extra="forbid", validate_default=True, allow_inf_nan=False)
