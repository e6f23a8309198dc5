"""The one verdict policy: severity order and the exit code of a status."""

from __future__ import annotations

import pytest

from testbed.core.errors import EXIT_FAILED, EXIT_INFRA, EXIT_NOTHING_TESTED, EXIT_OK
from testbed.results.verdict import SEVERITY, Status, exit_code, worst


def test_every_status_has_one_place_in_the_order() -> None:
    assert sorted(SEVERITY) == sorted(Status)
    assert len(set(SEVERITY)) == len(SEVERITY)


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        ([Status.PASS, Status.ERROR, Status.FAIL], Status.FAIL),
        ([Status.ERROR, Status.INCONCLUSIVE], Status.ERROR),
        ([Status.NOT_RUN, Status.INCONCLUSIVE, Status.PASS], Status.NOT_RUN),
        ([Status.ERROR, Status.NOT_RUN], Status.ERROR),
        ([Status.PASS, Status.INCONCLUSIVE], Status.INCONCLUSIVE),
        ([Status.SKIPPED, Status.PASS], Status.PASS),
        (["SKIPPED", "NOT RUN"], Status.NOT_RUN),  # as read back from summary.json
        ([], Status.SKIPPED),
    ],
)
def test_worst(statuses: list[Status], expected: Status) -> None:
    assert worst(statuses) is expected


@pytest.mark.parametrize(
    ("status", "code", "code_failing_inconclusive"),
    [
        (Status.PASS, EXIT_OK, EXIT_OK),
        (Status.SKIPPED, EXIT_NOTHING_TESTED, EXIT_NOTHING_TESTED),  # nothing was tested
        (Status.INCONCLUSIVE, EXIT_OK, EXIT_FAILED),
        (Status.FAIL, EXIT_FAILED, EXIT_FAILED),
        (Status.ERROR, EXIT_INFRA, EXIT_INFRA),
        (Status.NOT_RUN, EXIT_INFRA, EXIT_INFRA),
    ],
)
def test_exit_code(status: Status, code: int, code_failing_inconclusive: int) -> None:
    assert exit_code(status) == code
    assert exit_code(status.value, {Status.INCONCLUSIVE}) == code_failing_inconclusive


def test_not_run_is_a_status_read_back_by_value() -> None:
    assert Status("NOT RUN") is Status.NOT_RUN
