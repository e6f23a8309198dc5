"""``testbed export tekton``: the plan as a Tekton v1 PipelineRun with an embedded pipeline,
one task per treatment, the strategy as ``runAfter`` edges (seed 001's pipeline, generated)."""

from __future__ import annotations

from typing import Any

from testbed.execution.export.objects import LABELS, CampaignVolume, ExportOptions
from testbed.execution.export.order import Task
from testbed.execution.export.step import worker_container
from testbed.plan.model import Plan

RUN_NAME = "$(context.pipelineRun.name)"


def pipeline_run(
    campaign: str,
    plan: Plan,
    tasks: list[Task],
    options: ExportOptions,
    volume: CampaignVolume,
    *,
    backend: str,
    fail_fast: bool,
) -> dict[str, Any]:
    """The PipelineRun object."""
    return {
        "apiVersion": "tekton.dev/v1",
        "kind": "PipelineRun",
        "metadata": {
            "generateName": f"{campaign.lower()[:50]}-",
            "namespace": options.namespace,
            "labels": {**LABELS, "testbed.io/campaign": campaign},
        },
        "spec": {
            "taskRunTemplate": {"serviceAccountName": options.service_account},
            "timeouts": {"pipeline": "0s"},  # a benchmark takes as long as it takes
            "pipelineSpec": {
                "tasks": [_task(t, plan, options, volume, backend, fail_fast) for t in tasks]
            },
        },
    }


def _task(
    task: Task,
    plan: Plan,
    options: ExportOptions,
    volume: CampaignVolume,
    backend: str,
    fail_fast: bool,
) -> dict[str, Any]:
    container = worker_container(task, plan, options, backend, RUN_NAME)
    step: dict[str, Any] = {
        "name": "worker",
        "image": container["image"],
        "command": container["command"],
        "args": container["args"],
        "envFrom": container["envFrom"],
        "volumeMounts": container["volumeMounts"],
        "computeResources": container["resources"],
    }
    if not fail_fast:
        # a FAIL verdict must not skip the treatments after it; the results are in S3
        step["onError"] = "continue"
    spec: dict[str, Any] = {
        "name": task.name,
        "taskSpec": {
            "metadata": {"labels": {"testbed.io/treatment": task.treatment.id}},
            "volumes": [volume.volume(), {"name": "results", "emptyDir": {}}],
            "steps": [step],
        },
    }
    if task.after:
        spec["runAfter"] = list(task.after)
    return spec
