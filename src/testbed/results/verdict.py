"""Verdicts: what a probe decided, with the evidence that decided it; and the one policy
that orders statuses and turns them into an exit code.

Every place that combines statuses (a run's status, an A/B probe's criteria, the exit code
of ``run``, ``report`` and ``load``) uses :data:`SEVERITY` and :func:`exit_code` from here.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable
from typing import Any

from pydantic import BaseModel, Field

from testbed.core.errors import EXIT_FAILED, EXIT_INFRA, EXIT_NOTHING_TESTED, EXIT_OK


class Status(enum.StrEnum):
    """PASS and FAIL judge the product; ERROR blames the infrastructure; INCONCLUSIVE means
    not enough (or not trustworthy enough) data; SKIPPED was never meant to run here (with
    the reason); NOT_RUN was planned but has no verdict (the run stopped before it)."""

    PASS = "PASS"  # noqa: S105 - a verdict, not a password
    FAIL = "FAIL"
    ERROR = "ERROR"
    INCONCLUSIVE = "INCONCLUSIVE"
    SKIPPED = "SKIPPED"
    NOT_RUN = "NOT RUN"


#: Most severe first; combining statuses keeps the most severe. FAIL comes before ERROR:
#: a product found wrong stays wrong whatever else broke, and exit code 1 must not be
#: mistaken by CI for an infrastructure hiccup worth a retry (exit 3). A planned treatment
#: without a verdict (NOT RUN) is an infrastructure matter, just below ERROR.
SEVERITY: tuple[Status, ...] = (
    Status.FAIL,
    Status.ERROR,
    Status.NOT_RUN,
    Status.INCONCLUSIVE,
    Status.PASS,
    Status.SKIPPED,
)


class Verdict(BaseModel):
    """One decision. ``evidence`` holds the values, thresholds and method behind it."""

    status: Status
    reason: str = ""
    evidence: dict[str, Any] = Field(default_factory=dict)


def worst(statuses: Iterable[Status | str]) -> Status:
    """The most severe of ``statuses`` in :data:`SEVERITY` order; SKIPPED when empty."""
    found = [Status(s) for s in statuses]
    if not found:
        return Status.SKIPPED
    return min(found, key=SEVERITY.index)


def exit_code(
    status: Status | str,
    fail_on: Collection[Status] = (),
    *,
    tested: bool = True,
    partly_skipped: bool = False,
) -> int:
    """The exit code of a command whose outcome is ``status`` (docs/results.md, Exit codes).

    ERROR and NOT RUN → 3; FAIL → 1; SKIPPED, or any outcome that was not ``tested`` (no
    case ran, no request was sent) → 5 (:data:`EXIT_NOTHING_TESTED`): nothing at all was
    tested, which must never read as green.
    INCONCLUSIVE → 0, or 1 when it is in ``fail_on`` (``--fail-on inconclusive``); a PASS or
    INCONCLUSIVE that ``partly_skipped`` (a treatment or a case was skipped) → 1 when SKIPPED
    is in ``fail_on`` (``--fail-on skipped``); else 0.
    """
    status = Status(status)
    if status in (Status.ERROR, Status.NOT_RUN):
        return EXIT_INFRA
    if status is Status.FAIL:
        return EXIT_FAILED
    if status is Status.SKIPPED or not tested:
        return EXIT_NOTHING_TESTED
    if status in fail_on or (partly_skipped and Status.SKIPPED in fail_on):
        return EXIT_FAILED
    return EXIT_OK
