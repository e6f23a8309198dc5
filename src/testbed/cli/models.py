"""``testbed models list|prepare NAME|fetch S3_URL --to DIR``: bundled models, and weights
from object storage (the Kubernetes backend's init container runs ``fetch``).

``prepare`` converts a bundled model's GGUF into a transformers folder in the model cache
once (about half a minute) and checks its checksums on every later call (half a second).
``list`` shows every bundled model, whether it is prepared, where and how big.
"""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "models",
        help="bundled models: list, prepare; fetch s3:// weights",
        description="Bundled models (offline): list them, or prepare one for serving.",
    )
    verbs = parser.add_subparsers(dest="models_command", metavar="ACTION")
    listing = verbs.add_parser("list", help="show bundled models and where they are prepared")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    listing.set_defaults(handler=handle_list)
    prepare = verbs.add_parser("prepare", help="convert a bundled model once (idempotent)")
    prepare.add_argument("name", metavar="NAME", help="e.g. smollm2-135m")
    prepare.add_argument("--force", action="store_true", help="convert again even if prepared")
    prepare.set_defaults(handler=handle_prepare)
    fetch = verbs.add_parser(
        "fetch", help="download s3://bucket/prefix into DIR/bucket/prefix (pod init containers)"
    )
    fetch.add_argument("url", metavar="S3_URL", help="s3://bucket/prefix")
    fetch.add_argument("--to", required=True, metavar="DIR", help="parent folder")
    fetch.add_argument("--s3-endpoint-url", metavar="URL", help="default $AWS_ENDPOINT_URL")
    fetch.set_defaults(handler=handle_fetch)
    parser.set_defaults(handler=lambda _args: (parser.print_help(), 2)[1])


def handle_fetch(args: argparse.Namespace) -> int:
    from pathlib import Path

    from testbed.core.errors import InputError
    from testbed.results.s3 import download_prefix

    if not str(args.url).startswith("s3://"):
        raise InputError(f"{args.url!r} is not an s3:// URL; write s3://bucket/prefix")
    print(download_prefix(args.url, Path(args.to), args.s3_endpoint_url))
    return 0


def handle_prepare(args: argparse.Namespace) -> int:
    import sys

    from testbed.servers.models import prepare

    def say(message: str) -> None:
        sys.stderr.write(f"testbed: {message}\n")

    folder = prepare(args.name, force=args.force, progress=say)
    print(folder)
    return 0


def handle_list(args: argparse.Namespace) -> int:
    from testbed.servers.models import list_models

    rows = list_models()
    if args.json:
        import json

        print(json.dumps([_as_dict(r) for r in rows], indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="bundled models", caption="prepare one: testbed models prepare NAME")
    table.add_column("model", no_wrap=True)
    table.add_column("params", justify="right", no_wrap=True)
    table.add_column("prepared", no_wrap=True)
    table.add_column("size", justify="right", no_wrap=True)
    table.add_column("folder", overflow="fold")
    for row in rows:
        e = row.entry
        table.add_row(
            f"bundled:{e.name}",
            f"{e.shape.params / 1e6:.1f} M",
            row.created.replace("T", " ").rstrip("Z") if row.prepared else "no",
            f"{row.bytes / 2**20:.0f} MiB" if row.prepared else "",
            str(row.folder),
        )
    Console().print(table)
    return 0


def _as_dict(row: Any) -> dict[str, Any]:
    e = row.entry
    return {
        "model": f"bundled:{e.name}",
        "title": e.title,
        "package": e.package,
        "params": e.shape.params,
        "prepared": row.prepared,
        "folder": str(row.folder),
        "bytes": row.bytes,
        "created": row.created,
    }
