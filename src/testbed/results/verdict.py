"""Verdicts: what a probe decided, with the evidence that decided it."""

from __future__ import annotations

import enum
from typing import Any

from pydantic import BaseModel, Field


class Status(enum.StrEnum):
    """PASS and FAIL judge the product; ERROR blames the infrastructure; INCONCLUSIVE means
    not enough (or not trustworthy enough) data; SKIPPED was never run, with the reason."""

    PASS = "PASS"  # noqa: S105 - a verdict, not a password
    FAIL = "FAIL"
    ERROR = "ERROR"
    INCONCLUSIVE = "INCONCLUSIVE"
    SKIPPED = "SKIPPED"


#: Worst first: combining verdicts keeps the worst status.
_SEVERITY = [Status.ERROR, Status.FAIL, Status.INCONCLUSIVE, Status.PASS, Status.SKIPPED]


class Verdict(BaseModel):
    """One decision. ``evidence`` holds the values, thresholds and method behind it."""

    status: Status
    reason: str = ""
    evidence: dict[str, Any] = Field(default_factory=dict)


def worst(statuses: list[Status]) -> Status:
    """The most severe of ``statuses`` (ERROR > FAIL > INCONCLUSIVE > PASS > SKIPPED)."""
    if not statuses:
        return Status.SKIPPED
    return min(statuses, key=_SEVERITY.index)
