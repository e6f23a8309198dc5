"""``testbed cleanup DIR``: end server processes (or cluster objects) a run left behind."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("cleanup", help="end what an interrupted run left behind")
    parser.add_argument("dir", metavar="DIR", help="the run directory")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    import asyncio
    from pathlib import Path

    from testbed.execution.cleanup import cleanup_run

    done = asyncio.run(cleanup_run(Path(args.dir)))
    for line in done.notes + done.ended:
        print(line)
    if not done.ended:
        print(f"nothing left behind by {args.dir}")
    return 0
