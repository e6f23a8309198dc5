"""``testbed worker FILE --treatment ID``: run one treatment of a campaign — the entry point
of every task of an exported Tekton or Argo pipeline (``testbed export``) and of every probe
Job of ``backend.probes: cluster``.

It is ``testbed run`` cut down to one treatment: the same backend provisions that
treatment's servers, the same probe runs, a one-treatment run directory is written (and
uploaded with ``--upload``), and the exit code is the treatment's verdict. With
``--endpoint NAME=URL`` nothing is provisioned: the probe runs against the servers at those
URLs. With ``--stream`` every record, the treatment's other files and its summary are also
written to stdout as stream lines (``testbed.results.stream``) for the controller that
follows this process's log; everything else goes to stderr.
"""

from __future__ import annotations

import argparse
from typing import Any

from testbed.cli.exit_policy import add_fail_on, fail_on
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
    add_fail_on(parser)
    parser.add_argument(
        "--endpoint",
        action="append",
        metavar="NAME=URL",
        help="deployment NAME is served at URL: provision nothing, probe it there (repeatable)",
    )
    parser.add_argument(
        "--stream",
        action="store_true",
        help="write records and the summary to stdout as JSON lines (probe Jobs)",
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    import asyncio
    import json
    from pathlib import Path

    from rich.console import Console

    from testbed.backends.endpoints import parse_endpoints
    from testbed.cli.run import cleanup_failed
    from testbed.config.loader import load_campaign
    from testbed.execution.pipeline import check_inputs, execute, open_new
    from testbed.execution.run import RunOptions
    from testbed.report.run_summary import finish_run
    from testbed.results.rundir import SUMMARY
    from testbed.results.stream import StreamOut

    loaded = load_campaign(args.file, args.preset, args.sets)
    endpoints = parse_endpoints(args.endpoint) if args.endpoint else None
    if endpoints is not None:
        plan = check_inputs(loaded).only([args.treatment])
        _check_endpoints(endpoints, plan.workers.values(), loaded.campaign.deployments)
    out = StreamOut.take_stdout() if args.stream else None
    console = Console(stderr=out is not None)
    options = RunOptions(
        out=Path(args.out) if args.out else None,
        only=frozenset([args.treatment]),
        endpoints=endpoints,
        record_tee=out.record if out is not None else None,
    )
    run_dir, plan = open_new(loaded, options)
    console.print(f"treatment {args.treatment} · run directory: [bold]{run_dir.path}[/bold]")
    try:
        outcome = asyncio.run(execute(loaded, run_dir, plan, options))
        if out is not None:
            (treatment,) = plan.treatments
            folder = run_dir.treatment(treatment.dirname)
            out.files(folder)
            summary = folder / SUMMARY
            out.summary(json.loads(summary.read_text()) if summary.exists() else None)
    finally:
        if out is not None:
            out.close()
    code = finish_run(
        run_dir,
        console,
        upload=args.upload,
        index_url=None,
        s3_endpoint_url=args.s3_endpoint_url,
        fail_on=fail_on(args),
    )
    return cleanup_failed(outcome.cleanup_error, code)


def _check_endpoints(endpoints: dict[str, str], workers: Any, deployments: Any) -> None:
    """Every URL names a deployment; every server the treatment needs has a URL."""
    from testbed.config.server_kinds import provisioned
    from testbed.core.errors import InputError

    names = [d.name for d in deployments]
    for name in endpoints:
        if name not in names:
            raise InputError(
                f"--endpoint {name}=…: {name} is not a deployment of the campaign;"
                f" known: {', '.join(names) or '(none)'}"
            )
    for worker in workers:
        if worker.deployment not in endpoints and provisioned(worker.config):
            raise InputError(
                f"the treatment needs deployment {worker.deployment}: give"
                f" --endpoint {worker.deployment}=URL (with --endpoint nothing is provisioned)"
            )
