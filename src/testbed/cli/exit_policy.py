"""``--fail-on``: the one option by which a verdict-deciding command (``run``, ``report``,
``load``) can also exit 1 on INCONCLUSIVE.

INCONCLUSIVE exits 0 by default (not enough data is not a broken product); a CI job that
wants enough data or a red build passes ``--fail-on inconclusive``. The mapping from status
to exit code itself lives in :func:`testbed.results.verdict.exit_code`.
"""

from __future__ import annotations

import argparse
from typing import Any

#: ``--fail-on`` choices and the status each names.
CHOICES = {"inconclusive": "INCONCLUSIVE"}


def add_fail_on(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--fail-on",
        action="append",
        default=[],
        choices=tuple(CHOICES),
        metavar="STATUS",
        help="also exit 1 on this status (repeatable; choices: inconclusive)",
    )


def fail_on(args: argparse.Namespace) -> frozenset[Any]:
    """The statuses ``--fail-on`` names."""
    from testbed.results.verdict import Status

    return frozenset(Status(CHOICES[name]) for name in args.fail_on)
