"""The one container every exported task runs: ``testbed worker`` for one treatment, which
provisions that treatment's servers with the campaign's backend, runs its probe, writes a
one-treatment run directory and uploads it to S3."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubefacts.gpu import GPU
from kubefacts.quantity import cpu_quantity, memory_quantity
from testbed.config.stacks import StackDeployment
from testbed.execution.export.objects import (
    CAMPAIGN_MOUNT,
    LABELS,
    RESULTS_MOUNT,
    CampaignVolume,
    ExportOptions,
)
from testbed.execution.export.order import Task
from testbed.plan.model import Plan


@dataclass(frozen=True)
class ExportedRun:
    """Everything an engine's renderer needs: the plan, its ordered tasks, where it runs."""

    campaign: str
    plan: Plan
    tasks: list[Task]
    options: ExportOptions
    volume: CampaignVolume
    servers_here: bool  # the backend's servers run in the task's pod (local)
    fail_fast: bool

    def metadata(self) -> dict[str, Any]:
        """The run object's metadata: a generated name, the namespace, testbed's labels."""
        return {
            "generateName": f"{self.campaign.lower()[:50]}-",
            "namespace": self.options.namespace,
            "labels": {**LABELS, "testbed.io/campaign": self.campaign},
        }

    def volumes(self) -> list[dict[str, Any]]:
        return [self.volume.volume(), {"name": "results", "emptyDir": {}}]

    def container(self, task: Task, run_name: str) -> dict[str, Any]:
        return worker_container(task, self.plan, self.options, self.servers_here, run_name)


def worker_args(task: Task, options: ExportOptions, run_name: str) -> list[str]:
    """Arguments of ``testbed``; ``run_name`` is the engine's expression for the run's name."""
    args = [
        "worker",
        f"{CAMPAIGN_MOUNT}/campaign.yaml",
        "--treatment",
        task.treatment.id,
        "--out",
        f"{RESULTS_MOUNT}/{task.name}",
        "--upload",
        f"{options.upload}/{run_name}",
    ]
    if options.s3_endpoint_url:
        args += ["--s3-endpoint-url", options.s3_endpoint_url]
    return args


def worker_container(
    task: Task, plan: Plan, options: ExportOptions, servers_here: bool, run_name: str
) -> dict[str, Any]:
    """The container spec (image, command, env from the Secret, mounts, resources)."""
    return {
        "image": options.image,
        "command": ["testbed"],
        "args": worker_args(task, options, run_name),
        "envFrom": [{"secretRef": {"name": options.secret}}],
        "volumeMounts": [
            {"name": "campaign", "mountPath": CAMPAIGN_MOUNT, "readOnly": True},
            {"name": "results", "mountPath": RESULTS_MOUNT},
        ],
        "resources": resources(task, plan, servers_here),
    }


def resources(task: Task, plan: Plan, servers_here: bool) -> dict[str, Any]:
    """With the local backend the servers run inside the task's pod, so it asks for their
    resources; otherwise the pod only drives probes (the servers are pods of their own)."""
    if not servers_here:
        return {"requests": {"cpu": "1", "memory": "1Gi"}}
    deployments = [plan.workers[w].config for w in task.treatment.workers]
    configs = [d.resources for d in deployments if not isinstance(d, StackDeployment)]
    cpu = sum(c.cpu for c in configs) or 1.0
    memory = sum(c.memory_gb for c in configs) or 1.0
    gpu = sum(c.gpu for c in configs if isinstance(c.gpu, int))
    requests = {"cpu": cpu_quantity(cpu), "memory": memory_quantity(memory)}
    spec: dict[str, Any] = {"requests": requests}
    if gpu:
        spec["limits"] = {GPU: str(gpu)}
    return spec
