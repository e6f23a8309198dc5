"""The publishing options of ``run`` and ``report``, defined once: where the run is recorded
(``--index``) and where its directory is copied (``--upload``, ``--s3-endpoint-url``).

Each command reads them into :class:`testbed.report.run_summary.PublishOptions`; the
campaign's ``results:`` section gives the defaults (docs/results.md).
"""

from __future__ import annotations

import argparse


def add_publish_options(parser: argparse.ArgumentParser, *, no_index: bool = False) -> None:
    """``--index``, ``--upload``, ``--s3-endpoint-url``; and ``--no-index`` when asked."""
    parser.add_argument(
        "--index", metavar="URL", help="results index, a SQLAlchemy URL (default: see docs)"
    )
    if no_index:
        parser.add_argument("--no-index", action="store_true", help="do not record the run")
    parser.add_argument("--upload", metavar="S3_URL", help="copy the run directory to S3")
    parser.add_argument(
        "--s3-endpoint-url", metavar="URL", help="endpoint of a MinIO-compatible store"
    )
