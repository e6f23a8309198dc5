"""``testbed export tekton|argo FILE``: write the plan as a Tekton PipelineRun or an Argo
Workflow, with the namespace, RBAC, campaign ConfigMap and Secret template it needs."""

from __future__ import annotations

import argparse

from testbed.cli.plan import add_campaign_arguments


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("export", help="the plan as a Tekton PipelineRun or Argo Workflow")
    parser.add_argument("engine", choices=("tekton", "argo"), help="the in-cluster engine")
    add_campaign_arguments(parser)
    parser.add_argument(
        "-o", "--out", metavar="DIR", help="write one file per object kind there (default: stdout)"
    )
    parser.add_argument("--namespace", help="where the pipeline runs (default: testbed-<name>)")
    parser.add_argument("--image", help="testbed's image (default: the backend's, testbed:latest)")
    parser.add_argument("--upload", metavar="S3_URL", help="default: the campaign's results.upload")
    parser.add_argument("--s3-endpoint-url", metavar="URL", help="for MinIO-compatible stores")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    import sys
    from pathlib import Path

    import yaml
    from rich.console import Console
    from rich.table import Table

    from testbed.config.loader import load_campaign
    from testbed.execution.export import MAIN_FILE, apply_commands, export
    from testbed.execution.export.objects import options_for
    from testbed.execution.pipeline import check_inputs
    from testbed.results.files import write_atomic

    loaded = load_campaign(args.file, args.preset, args.sets)
    plan = check_inputs(loaded)
    options = options_for(
        loaded,
        namespace=args.namespace,
        image=args.image,
        upload=args.upload,
        s3_endpoint_url=args.s3_endpoint_url,
    )
    files, tasks = export(args.engine, loaded, plan, options)
    if not args.out:
        documents = [obj for objects in files.values() for obj in objects]
        yaml.safe_dump_all(documents, sys.stdout, sort_keys=False)
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, objects in files.items():
        write_atomic(out / name, yaml.safe_dump_all(objects, sort_keys=False))
    console = Console()
    table = Table(title=f"{args.engine}: {len(tasks)} task(s), one per planned treatment")
    for column in ("task", "treatment", "probe", "runs after"):
        table.add_column(column)
    for task in tasks:
        after = ", ".join(task.after) if len(task.after) <= 3 else f"{len(task.after)} tasks"
        table.add_row(task.name, task.treatment.slug, task.treatment.probe, after or "—")
    console.print(table)
    skipped = len(plan.treatments) - len(plan.planned())
    if skipped:
        console.print(f"{skipped} treatment(s) skipped by the plan are not exported")
    commands = apply_commands(str(out), MAIN_FILE[args.engine], admin="admin.yaml" in files)
    lines = "".join(f"\n  {line}" for line in commands)
    console.print(f"wrote {', '.join(sorted(files))} to {out}; apply with:{lines}")
    return 0
