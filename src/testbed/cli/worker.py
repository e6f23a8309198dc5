"""``testbed worker FILE --treatment ID``: run one treatment of a campaign — the entry point
of every task of an exported Tekton or Argo pipeline (``testbed export``).

It is ``testbed run`` cut down to one treatment: the same backend provisions that
treatment's servers, the same probe runs, a one-treatment run directory is written (and
uploaded with ``--upload``), and the exit code is the treatment's verdict.
"""

from __future__ import annotations

import argparse

from testbed.cli.plan import add_campaign_arguments


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("worker", help="run one treatment (in-cluster entry point)")
    add_campaign_arguments(parser)
    parser.add_argument(
        "--treatment", required=True, metavar="ID", help="treatment id, as `testbed plan` shows"
    )
    parser.add_argument("--out", metavar="DIR", help="the run directory (default: runs/<id>)")
    parser.add_argument("--upload", metavar="S3_URL", help="copy the run directory to S3")
    parser.add_argument("--s3-endpoint-url", metavar="URL", help="for MinIO-compatible stores")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    import asyncio
    from pathlib import Path

    from rich.console import Console

    from testbed.config.loader import load_campaign
    from testbed.execution.pipeline import RunOptions, execute, open_new
    from testbed.report.run_summary import finish_run

    console = Console()
    loaded = load_campaign(args.file, args.preset, args.sets)
    options = RunOptions(out=Path(args.out) if args.out else None, only=frozenset([args.treatment]))
    run_dir, plan = open_new(loaded, options)
    console.print(f"treatment {args.treatment} · run directory: [bold]{run_dir.path}[/bold]")
    asyncio.run(execute(loaded, run_dir, plan, options))
    return finish_run(
        run_dir,
        console,
        upload=args.upload,
        index_url=None,
        s3_endpoint_url=args.s3_endpoint_url,
    )
