"""``testbed export tekton``: the plan as a Tekton v1 PipelineRun with an embedded pipeline,
one task per treatment, the strategy as ``runAfter`` edges (seed 001's pipeline, generated)."""

from __future__ import annotations

from typing import Any

from testbed.execution.export.order import Task
from testbed.execution.export.step import ExportedRun

RUN_NAME = "$(context.pipelineRun.name)"


def pipeline_run(run: ExportedRun) -> dict[str, Any]:
    """The PipelineRun object."""
    return {
        "apiVersion": "tekton.dev/v1",
        "kind": "PipelineRun",
        "metadata": run.metadata(),
        "spec": {
            "taskRunTemplate": {"serviceAccountName": run.options.service_account},
            "timeouts": {"pipeline": "0s"},  # a benchmark takes as long as it takes
            "pipelineSpec": {"tasks": [_task(run, task) for task in run.tasks]},
        },
    }


def _task(run: ExportedRun, task: Task) -> dict[str, Any]:
    container = run.container(task, RUN_NAME)
    step: dict[str, Any] = {
        "name": "worker",
        "image": container["image"],
        "command": container["command"],
        "args": container["args"],
        "envFrom": container["envFrom"],
        "volumeMounts": container["volumeMounts"],
        "computeResources": container["resources"],
    }
    if not run.fail_fast:
        # a FAIL verdict must not skip the treatments after it; the results are in S3
        step["onError"] = "continue"
    spec: dict[str, Any] = {
        "name": task.name,
        "taskSpec": {
            "metadata": {"labels": {"testbed.io/treatment": task.treatment.id}},
            "volumes": run.volumes(),
            "steps": [step],
        },
    }
    if task.after:
        spec["runAfter"] = list(task.after)
    return spec
