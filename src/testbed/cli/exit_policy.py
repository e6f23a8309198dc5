"""``--fail-on``: the one option by which a verdict-deciding command (``run``, ``report``,
``load``, ``worker``) can also exit 1 on INCONCLUSIVE, or on a partial skip.

INCONCLUSIVE exits 0 by default (not enough data is not a broken product); a CI job that
wants enough data or a red build passes ``--fail-on inconclusive``. A run that skipped some
treatments or cases but tested others exits 0 by default (the skips are shown in the plan,
the summary and the report); ``--fail-on skipped`` makes any skip exit 1. A run that tested
nothing at all exits 5 whatever the flags. The mapping from status to exit code itself lives
in :func:`testbed.results.verdict.exit_code`.
"""

from __future__ import annotations

import argparse
from typing import Any

#: ``--fail-on`` choices and the status each names.
CHOICES = {"inconclusive": "INCONCLUSIVE", "skipped": "SKIPPED"}


def add_fail_on(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--fail-on",
        action="append",
        default=[],
        choices=tuple(CHOICES),
        metavar="STATUS",
        help="also exit 1 on this status (repeatable): inconclusive; skipped (a treatment"
        " or case was skipped — a run that tested nothing exits 5 anyway)",
    )


def fail_on(args: argparse.Namespace) -> frozenset[Any]:
    """The statuses ``--fail-on`` names."""
    from testbed.results.verdict import Status

    return frozenset(Status(CHOICES[name]) for name in args.fail_on)
