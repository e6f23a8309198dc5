"""``testbed record FILE``: write golden outputs from a reference deployment.

FILE is a campaign: its ``correctness.reference`` deployment (or ``--deployment NAME``) is
started by the campaign's backend and every case file of its ``correctness:`` section is
rewritten with the answers (names and rules kept). With ``suites``, each suite's cases are
recorded from its own reference (with ``--deployment``, only the suites it belongs to).
FILE may also be a case file, recorded from a server that already runs (``--url``).
"""

from __future__ import annotations

import argparse
from typing import Any

from testbed.cli.plan import add_campaign_arguments


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "record", help="write golden outputs of case files from a reference deployment"
    )
    add_campaign_arguments(parser)
    parser.add_argument("--deployment", metavar="NAME", help="default: correctness.reference")
    parser.add_argument(
        "--out", metavar="CASES.yaml", help="write here instead of in place (one case file)"
    )
    parser.add_argument("--url", help="record a case FILE from this running server instead")
    parser.add_argument(
        "--protocol", choices=("openai", "tgi", "tgis", "both"), default="openai", help="with --url"
    )
    parser.add_argument("--grpc", metavar="HOST:PORT", help="with --url --protocol tgis")
    parser.add_argument("--model", default="", help="with --url: the model name to send")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    import asyncio
    from pathlib import Path

    from rich.console import Console

    from testbed.config.yamlsource import safe_load
    from testbed.core.errors import InputError

    path = Path(args.file)
    try:
        data = safe_load(path.read_text(encoding="utf-8"), str(path))
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read it ({exc})") from None
    console = Console()
    if isinstance(data, dict) and "correctness" in data:
        batches = asyncio.run(_from_campaign(args, console))
    elif args.url:
        batches = [asyncio.run(_from_url(args, path, console))]
    else:
        raise InputError(
            f"{path} is a case file: give --url URL of a running server, or record through a"
            " campaign whose correctness: section lists it"
        )
    out = Path(args.out) if args.out else None
    count = sum(len(recorded) for recorded, _ in batches)
    if out is not None and count != 1:
        raise InputError(f"--out takes one case file, but {count} were recorded")
    for recorded, source in batches:
        _report(recorded, source, out, console)
    return 0


async def _from_campaign(args: argparse.Namespace, console: Any) -> list[tuple[list[Any], str]]:
    """Each suite's (or the section's) case files, recorded from its reference."""

    from testbed.config.loader import load_campaign
    from testbed.core.errors import InputError

    loaded = load_campaign(args.file, args.preset, args.sets)
    config = loaded.campaign.correctness
    if config is None:
        raise InputError(f"{args.file} has no correctness: section to record")
    names = [d.name for d in loaded.campaign.deployments]
    sections = [
        s
        for s in config.split()
        if args.deployment is None or args.deployment in (s.deployments or names)
    ]
    if not sections:
        raise InputError(f"no correctness suite runs deployment {args.deployment!r}")
    batches = []
    for section in sections:
        mine = section.deployments or names
        name = args.deployment or section.reference or (mine[0] if len(mine) == 1 else None)
        if name is None:
            raise InputError(
                f"which deployment is the reference? give --deployment (one of"
                f" {', '.join(mine)}) or set the reference"
            )
        batches.append(await _record_section(loaded, section, name, console))
    return batches


async def _record_section(
    loaded: Any, config: Any, name: str, console: Any
) -> tuple[list[Any], str]:
    """``config``'s case files recorded from deployment ``name``."""
    import tempfile
    from pathlib import Path

    from testbed.execution.single import provision_one
    from testbed.probes.correctness.goldens import generate_files

    paths = [loaded.base_dir / case for case in config.cases]
    with tempfile.TemporaryDirectory(prefix="testbed-record-") as work:
        console.print(f"starting [bold]{name}[/bold] …")
        async with provision_one(loaded, name, Path(work)) as running:
            endpoint = running.handle.endpoint
            source = f"{name} ({running.config.server}, {running.config.model})"
            console.print(f"recording from {source} at {endpoint.base_url}")
            recorded = await generate_files(
                paths, endpoint, config, running.document, lambda m: console.print(f"  {m}")
            )
    return recorded, source


async def _from_url(args: argparse.Namespace, path: Any, console: Any) -> tuple[list[Any], str]:
    from testbed.clients.endpoint import Endpoint
    from testbed.config.correctness import CorrectnessProbe
    from testbed.core.errors import InputError
    from testbed.probes.correctness.goldens import generate_files

    protocols: Any = ("openai", "tgi") if args.protocol == "both" else (args.protocol,)
    if args.protocol == "tgis" and not args.grpc:
        raise InputError("--protocol tgis records over gRPC: give --grpc HOST:PORT")
    endpoint = Endpoint(
        base_url=args.url.rstrip("/"),
        protocols=protocols,
        model=args.model,
        server_kind="external",
        grpc_target=args.grpc,
    )
    config = CorrectnessProbe(cases=[str(path)], protocol=args.protocol)
    deployment = {"name": "external", "server": "external", "url": args.url, "params": {}}
    console.print(f"recording from {args.url}")
    recorded = await generate_files([path], endpoint, config, deployment, console.print)
    return recorded, args.url


def _report(recorded: list[Any], source: str, out: Any, console: Any) -> None:
    from testbed.probes.correctness.goldens import write

    for item in recorded:
        target = write(item, source, out)
        console.print(f"wrote [bold]{target}[/bold] ({len(item.document)} cases)")
        for note in item.notes:
            if "left as it was" in note:
                console.print(f"  [yellow]{note}[/yellow]")
