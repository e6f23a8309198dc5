"""``testbed export tekton|argo``: the plan rendered for an in-cluster engine.

The exported pipeline reproduces ``testbed plan``'s treatments (one task each, named
``tNNN-<treatment id>``) and the campaign's execution strategy (order.py); every task runs
``testbed worker`` for its treatment and uploads its results to S3 (step.py). The objects it
needs — namespace, service account and RBAC, the campaign as a ConfigMap, a Secret template
of the ``${env:}`` values — come as separate manifests (objects.py), applied by the commands
of apply.py.
"""

from __future__ import annotations

from typing import Any, Literal

from testbed.config.loader import LoadedCampaign
from testbed.execution.export import argo, tekton
from testbed.execution.export.apply import MAIN_FILE, apply_commands
from testbed.execution.export.objects import ExportOptions, campaign_volume, support_objects
from testbed.execution.export.order import Task, ordered_tasks, stacks_take_turns
from testbed.execution.export.step import ExportedRun
from testbed.plan.model import Plan

Engine = Literal["tekton", "argo"]
ENGINES: tuple[Engine, ...] = ("tekton", "argo")


def export(
    engine: Engine, loaded: LoadedCampaign, plan: Plan, options: ExportOptions
) -> tuple[dict[str, list[dict[str, Any]]], list[Task]]:
    """File name → objects, and the tasks in order (for the terminal summary)."""
    campaign = loaded.campaign
    tasks = ordered_tasks(plan, campaign.execution)
    stacks_take_turns(tasks, plan)
    volume = campaign_volume(loaded, plan, options)
    render = tekton.pipeline_run if engine == "tekton" else argo.workflow
    run = ExportedRun(
        campaign.name,
        plan,
        tasks,
        options,
        volume,
        servers_here=campaign.backend.servers_here,
        fail_fast=campaign.execution.fail_fast,
    )
    main = render(run)
    files = support_objects(loaded, options, volume)
    files[MAIN_FILE[engine]] = [main]
    return files, tasks


__all__ = ["ENGINES", "MAIN_FILE", "Engine", "ExportOptions", "Task", "apply_commands", "export"]
