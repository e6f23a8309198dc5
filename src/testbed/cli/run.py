"""``testbed run FILE``: execute a campaign; ``--resume DIR`` finishes an interrupted run."""

from __future__ import annotations

import argparse

from testbed.cli.exit_policy import add_fail_on, fail_on
from testbed.cli.plan import add_campaign_arguments
from testbed.cli.publish_options import add_publish_options


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("run", help="execute a campaign (or --resume a run directory)")
    add_campaign_arguments(parser, nargs="?")
    parser.add_argument("--out", metavar="DIR", help="the run directory (default: runs/<id>)")
    parser.add_argument(
        "--resume", metavar="DIR", help="finish that run: keep finished treatments, redo the rest"
    )
    parser.add_argument(
        "--skip-phase",
        action="append",
        default=[],
        choices=("cleanup", "prepare", "test", "final_cleanup"),
        help="skip a phase (repeatable)",
    )
    parser.add_argument(
        "--cpu-budget", type=_cores, help="cores for workers (default: all)", metavar="CORES"
    )
    parser.add_argument(
        "--no-wait",
        action="store_true",
        help="Kubernetes with backend.lease: exit 3 when another run holds the cluster",
    )
    add_publish_options(parser)
    add_fail_on(parser)
    parser.add_argument(
        "--image", metavar="IMAGE", help="Kubernetes: image of the servers under test"
    )
    parser.add_argument(
        "--image-tag", metavar="TAG", help="Kubernetes: tag of the servers under test"
    )
    parser.add_argument("--context", metavar="NAME", help="Kubernetes: the kubeconfig context")
    parser.add_argument(
        "--label", metavar="TEXT", help="what this run is, recorded with it (testbed history)"
    )
    parser.add_argument(
        "--commit",
        metavar="SHA",
        help="the commit under test (default: $GIT_COMMIT, $GITHUB_SHA, $CI_COMMIT_SHA, else"
        " git's HEAD in the campaign's folder)",
    )
    parser.set_defaults(handler=handle)


def _cores(text: str) -> float:
    """``--cpu-budget``: a positive, finite number of cores."""
    import math

    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of cores, e.g. 2")
    return value


def _image_sets(args: argparse.Namespace) -> list[str]:
    """``--image``, ``--image-tag`` and ``--context`` as the campaign overrides they are
    (recorded in the run's resolved campaign, so ``--resume`` reuses them); refused unless
    the backend is a cluster."""
    import json

    sets = []  # values as JSON strings: a tag such as 2 or 1.10 stays a string
    if args.image:
        sets.append(f"backend.server_image={json.dumps(args.image)}")
    if args.image_tag:
        sets.append(f"backend.image_tag={json.dumps(args.image_tag)}")
    if args.context:
        sets.append(f"backend.context={json.dumps(args.context)}")
    if sets:
        from testbed.config.loader import load_campaign
        from testbed.core.errors import InputError

        backend = load_campaign(args.file, args.preset, args.sets).campaign.backend
        if not backend.cluster:
            raise InputError(
                f"--image/--image-tag/--context are Kubernetes options, but the backend is"
                f" {backend.kind} — add --set backend.kind=kubernetes"
            )
    return sets


def handle(args: argparse.Namespace) -> int:
    import asyncio
    from pathlib import Path

    from rich.console import Console

    from testbed.config.backend_settings import KubernetesSettings
    from testbed.config.loader import load_campaign
    from testbed.core.errors import InputError
    from testbed.execution.pipeline import execute, open_new, open_resume
    from testbed.execution.run import RunOptions
    from testbed.report.live import LiveDisplay
    from testbed.report.run_summary import finish_run

    console = Console(stderr=False)
    if args.resume:
        if args.preset or args.sets or args.image or args.image_tag or args.context:
            raise InputError(
                "--resume reuses the run's own resolved campaign; drop --preset/--set/--image"
            )
        if args.label or args.commit:
            raise InputError("--resume keeps the run's own --label and commit; drop them")
        loaded, run_dir, plan = open_resume(Path(args.resume))
    else:
        if not args.file:
            raise InputError("give a campaign FILE, or --resume DIR")
        loaded = load_campaign(args.file, args.preset, args.sets + _image_sets(args))
        backend = loaded.campaign.backend
        if args.no_wait and not (isinstance(backend, KubernetesSettings) and backend.lease):
            raise InputError("--no-wait applies to a shared cluster's turn: set backend.lease")
        opening = RunOptions(
            out=Path(args.out) if args.out else None, label=args.label, commit=args.commit
        )
        run_dir, plan = open_new(loaded, opening)
    console.print(f"run directory: [bold]{run_dir.path}[/bold]")
    from testbed.execution.case_counts import case_counts
    from testbed.report.plan_table import render_plan

    render_plan(plan, console, case_counts(loaded, plan))  # the Run Plan screen first
    with LiveDisplay(console, len(plan.treatments)) as display:
        options = RunOptions(
            skip_phases=args.skip_phase,
            observer=display,
            cpu_budget=args.cpu_budget,
            no_wait=args.no_wait,
            fresh_dir=not args.resume,
        )
        outcome = asyncio.run(execute(loaded, run_dir, plan, options))
    code = finish_run(
        run_dir,
        console,
        upload=args.upload,
        index_url=args.index,
        s3_endpoint_url=args.s3_endpoint_url,
        fail_on=fail_on(args),
    )
    return cleanup_failed(outcome.cleanup_error, code)


def cleanup_failed(error: Exception | None, code: int) -> int:
    """After the results are written: a failed final cleanup is reported, and is exit 3."""
    if error is None:
        return code
    import sys

    from testbed.core.errors import EXIT_INFRA

    sys.stderr.write(f"testbed: error: final cleanup failed: {error}\n")
    return EXIT_INFRA
