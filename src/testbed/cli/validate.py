"""``testbed validate FILE``: check a campaign file (and its plan) without running anything."""

from __future__ import annotations

import argparse

from testbed.cli.plan import add_campaign_arguments


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("validate", help="check a campaign file; exit 2 with the reason")
    add_campaign_arguments(parser)
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from testbed.config.loader import load_campaign
    from testbed.execution.pipeline import check_inputs

    plan = check_inputs(load_campaign(args.file, args.preset, args.sets))
    skipped = len(plan.treatments) - len(plan.planned())
    print(
        f"{args.file}: valid — {len(plan.workers)} worker(s), {len(plan.treatments)} treatment(s)"
        + (f", {skipped} skipped by the model-fit check" if skipped else "")
    )
    for note in plan.notes:  # valid, but worth knowing before a run (e.g. GPUs unused)
        print(f"note: {note}")
    return 0
