"""``testbed plan FILE``: show the plan a campaign expands into."""

from __future__ import annotations

import argparse
from typing import Any


def add_campaign_arguments(parser: argparse.ArgumentParser, nargs: str | None = None) -> None:
    """FILE, --preset and --set: shared by every command that loads a campaign."""
    parser.add_argument("file", metavar="FILE", nargs=nargs, help="campaign YAML file")
    parser.add_argument(
        "--preset", action="append", default=[], metavar="NAME", help="apply a preset (repeatable)"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="sets",
        help="override a dotted key, value parsed as YAML (repeatable; applied after presets)",
    )


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("plan", help="show the plan: workers, treatments, skipped ones")
    add_campaign_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    parser.add_argument("--explain", metavar="KEY", help="say where a resolved value came from")
    parser.add_argument(
        "--manifests",
        metavar="DIR",
        help="write every Kubernetes object the run would create into DIR (secrets masked)",
    )
    parser.add_argument(
        "--run-id", metavar="ID", help="run id for --manifests labels (default: <campaign>-plan)"
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    import json
    import sys

    from rich.console import Console

    from testbed.config.loader import load_campaign
    from testbed.core.secrets import redact
    from testbed.execution.pipeline import check_inputs
    from testbed.execution.steps import planned_steps
    from testbed.report.plan_table import render_plan
    from testbed.report.steps_view import render_steps

    loaded = load_campaign(args.file, args.preset, args.sets)
    if args.explain:
        value, source = loaded.explain(args.explain)
        print(f"{args.explain} = {redact(json.dumps(value))}\n  from: {source}")
        return 0
    plan = check_inputs(loaded)  # what run would refuse, plan refuses too (exit 2)
    if args.manifests:
        from pathlib import Path

        from testbed.backends.kubernetes.manifest_files import (
            plan_objects,
            probe_objects,
            stack_objects,
            write_manifests,
        )
        from testbed.execution.remote_probes import shipped_campaign

        backend = loaded.campaign.backend.model_dump(mode="json")
        workers = {w.id: w.config for w in plan.workers.values()}
        run_id = args.run_id or f"{loaded.campaign.name}-plan"
        objects = plan_objects(run_id, backend, workers)
        objects += stack_objects(run_id, backend, workers, loaded.base_dir)
        objects += probe_objects(run_id, backend, plan, shipped_campaign(loaded, plan))
        written = write_manifests(objects, Path(args.manifests))
        print(f"{len(written)} objects written to {args.manifests}")
        return 0
    steps = [step.to_json() for step in planned_steps(loaded)]
    from testbed.execution.case_counts import case_counts

    gpus = _gpus(loaded, plan)
    cases = case_counts(loaded, plan)
    if args.json:
        document = {**plan.to_json(), "steps": steps}
        document["case_counts"] = {t: {"run": r, "total": n} for t, (r, n) in cases.items()}
        if gpus is not None:
            document["gpus"] = {**gpus[0].to_json(), **gpus[1].to_json()}
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        console = Console()
        render_plan(plan, console, cases)
        render_steps(steps, console)
        if gpus is not None:
            from testbed.report.plan_table import render_gpus

            render_gpus(gpus[0], gpus[1], console)
    return 0


def _gpus(loaded: Any, plan: Any) -> Any:
    """The local backend's GPUs and each worker's (None elsewhere, or with no GPU at all)."""
    backend = loaded.campaign.backend
    if not backend.servers_here:
        return None
    from testbed.backends.local.gpus import plan_assignment

    workers = {w.id: w.config for w in plan.workers.values()}
    return plan_assignment(backend.model_dump(mode="json"), workers)
