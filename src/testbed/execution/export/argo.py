"""``testbed export argo``: the plan as an Argo Workflow with a DAG, one task per
treatment, the strategy as dependencies."""

from __future__ import annotations

from typing import Any

from testbed.execution.export.order import Task
from testbed.execution.export.step import ExportedRun

RUN_NAME = "{{workflow.name}}"
ENTRY = "treatments"


def workflow(run: ExportedRun) -> dict[str, Any]:
    """The Workflow object: a DAG template and one container template per treatment."""
    dag = [_dag_task(task, run.fail_fast) for task in run.tasks]
    templates: list[dict[str, Any]] = [
        {"name": ENTRY, "dag": {"failFast": run.fail_fast, "tasks": dag}}
    ]
    templates += [
        {
            "name": task.name,
            "metadata": {"labels": {"testbed.io/treatment": task.treatment.id}},
            "container": run.container(task, RUN_NAME),
        }
        for task in run.tasks
    ]
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": run.metadata(),
        "spec": {
            "entrypoint": ENTRY,
            "serviceAccountName": run.options.service_account,
            "volumes": run.volumes(),
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
