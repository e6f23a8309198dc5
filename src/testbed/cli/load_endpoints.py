"""``testbed load`` flags of the endpoints beyond generation: ``--api embeddings`` and its
batch size, dimensions and encoding (``--api responses`` needs none of its own)."""

from __future__ import annotations

import argparse
from typing import Any

#: Every ``--api`` value, in the order ``testbed load --help`` lists them.
APIS = ("completions", "chat", "tgi", "tgis", "embeddings", "responses")


def add_flags(p: argparse.ArgumentParser) -> None:
    """The embeddings flags (each maps to a field of ``load.embeddings``)."""
    p.add_argument(
        "--batch-size", type=int, help="--api embeddings: inputs per request (default 1)"
    )
    p.add_argument("--dimensions", type=int, help="--api embeddings: vector length to ask for")
    p.add_argument(
        "--encoding-format",
        choices=("float", "base64"),
        help="--api embeddings: how vectors come back (default float)",
    )


def section(args: argparse.Namespace) -> dict[str, Any]:
    """The ``embeddings:`` part of the load section the flags describe (empty when no flag
    is given; given without ``--api embeddings``, the load section's check refuses it)."""
    given = {
        "batch_size": args.batch_size,
        "dimensions": args.dimensions,
        "encoding_format": args.encoding_format,
    }
    fields = {key: value for key, value in given.items() if value is not None}
    return {"embeddings": fields} if fields else {}
