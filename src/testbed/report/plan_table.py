"""The plan as terminal tables: workers, then treatments with their factor values."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.table import Table

from testbed.backends.local.gpus import Assignment, Inventory
from testbed.core.secrets import redact
from testbed.plan.model import Plan

_MAX_ROWS = 200


def render_plan(
    plan: Plan, console: Console, cases: Mapping[str, tuple[int, int]] | None = None
) -> None:
    """Print the run plan (tgis-tester's first screen): workers, treatments, skipped ones;
    with ``cases`` (treatment id → runs after skips, in all) a correctness treatment's case
    count."""
    planned = plan.planned()
    skipped = [t for t in plan.treatments if t.status == "skipped"]
    console.print(
        f"[bold]Run plan[/bold] · campaign [cyan]{plan.campaign}[/cyan] · "
        f"{len(plan.workers)} worker(s) · {len(planned)} treatment(s) planned"
        + (f" · [yellow]{len(skipped)} skipped[/yellow]" if skipped else "")
    )
    workers = Table(title="Workers", title_justify="left", show_lines=False)
    for column in ("worker", "server", "model", "parameters"):
        workers.add_column(column)
    for worker in plan.workers.values():
        workers.add_row(
            worker.id,
            worker.server,
            redact(worker.config.model or getattr(worker.config, "url", "")),
            _params(worker.settings),
        )
    console.print(workers)
    factor_names = list(dict.fromkeys(f for t in plan.treatments for f in t.params))
    table = Table(title="Treatments", title_justify="left")
    counted = ("cases",) if cases else ()
    for column in ("#", "id", "probe", "worker(s)", *_headers(factor_names), *counted, "status"):
        table.add_column(column, overflow="fold")
    for treatment in plan.treatments[:_MAX_ROWS]:
        status = (
            "[green]planned[/green]"
            if treatment.status == "planned"
            else f"[yellow]skipped[/yellow]: {treatment.reason}"
        )
        table.add_row(
            str(treatment.index),
            treatment.id,
            treatment.probe,
            ", ".join(treatment.workers) or "—",
            *(_short(treatment.params.get(f, "")) for f in factor_names),
            *((_count(cases.get(treatment.id)),) if cases else ()),
            status,
        )
    console.print(table)
    if len(plan.treatments) > _MAX_ROWS:
        console.print(f"… and {len(plan.treatments) - _MAX_ROWS} more (use --json for all)")
    for note in plan.notes:
        console.print(f"[yellow]note:[/yellow] {note}")


def render_gpus(inventory: Inventory, assignment: Assignment, console: Console) -> None:
    """The local backend's GPUs and the devices each worker gets (or why it cannot fit)."""
    ids = ", ".join(map(str, inventory.ids)) or "none"
    table = Table(title=f"GPUs ({inventory.source}: {ids})", title_justify="left")
    table.add_column("worker")
    table.add_column("CUDA_VISIBLE_DEVICES")
    for worker, devices in assignment.devices.items():
        table.add_row(worker, ",".join(map(str, devices)))
    for worker, reason in assignment.unfit.items():
        table.add_row(worker, f"[yellow]skipped[/yellow]: {reason}")
    console.print(table)
    for note in inventory.notes:
        console.print(f"[yellow]note:[/yellow] {note}")


def _count(count: tuple[int, int] | None) -> str:
    if count is None:
        return ""
    run, total = count
    return f"{run}" + (f" ({total - run} skipped)" if total > run else "")


def _headers(factors: list[str]) -> list[str]:
    """Short column names: the last segment of each factor, or more where that collides."""
    leaves = [f.rsplit(".", 1)[-1] for f in factors]
    return [leaf if leaves.count(leaf) == 1 else f for f, leaf in zip(factors, leaves, strict=True)]


def _params(params: dict[str, Any]) -> str:
    shown = {k: v for k, v in params.items() if v not in (None, [], {}, "")}
    return redact(", ".join(f"{k}={_short(v)}" for k, v in shown.items()))


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 40 else text[:37] + "…"
