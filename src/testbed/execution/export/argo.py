"""``testbed export argo``: the plan as an Argo Workflow with a DAG, one task per
treatment, the strategy as dependencies."""

from __future__ import annotations

from typing import Any

from testbed.execution.export.objects import LABELS, CampaignVolume, ExportOptions
from testbed.execution.export.order import Task
from testbed.execution.export.step import worker_container
from testbed.plan.model import Plan

RUN_NAME = "{{workflow.name}}"
ENTRY = "treatments"


def workflow(
    campaign: str,
    plan: Plan,
    tasks: list[Task],
    options: ExportOptions,
    volume: CampaignVolume,
    *,
    backend: str,
    fail_fast: bool,
) -> dict[str, Any]:
    """The Workflow object: a DAG template and one container template per treatment."""
    dag = [_dag_task(task, fail_fast) for task in tasks]
    templates: list[dict[str, Any]] = [
        {"name": ENTRY, "dag": {"failFast": fail_fast, "tasks": dag}}
    ]
    for task in tasks:
        container = worker_container(task, plan, options, backend, RUN_NAME)
        templates.append(
            {
                "name": task.name,
                "metadata": {"labels": {"testbed.io/treatment": task.treatment.id}},
                "container": container,
            }
        )
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {
            "generateName": f"{campaign.lower()[:50]}-",
            "namespace": options.namespace,
            "labels": {**LABELS, "testbed.io/campaign": campaign},
        },
        "spec": {
            "entrypoint": ENTRY,
            "serviceAccountName": options.service_account,
            "volumes": [volume.volume(), {"name": "results", "emptyDir": {}}],
            "templates": templates,
        },
    }


def _dag_task(task: Task, fail_fast: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": task.name, "template": task.name}
    if task.after:
        spec["depends"] = " && ".join(_finished(name, fail_fast) for name in task.after)
    return spec


def _finished(name: str, fail_fast: bool) -> str:
    # without fail_fast a FAIL verdict (exit 1) must not skip the treatments after it
    return f"{name}.Succeeded" if fail_fast else f"({name}.Succeeded || {name}.Failed)"
