"""``backend.probes: cluster`` from the pipeline's side: what a probe Job can be given, and
the runner that puts each treatment's probe in the cluster.

A probe Job sees the campaign and its case files through a ConfigMap (the same volume
``testbed export`` builds). Files it cannot see — a load dataset file, A/B prompt files —
are refused before the run starts (exit 2, at the line naming them), never found missing
halfway through it.
"""

from __future__ import annotations

from typing import Any

from testbed.backends.base import Backend
from testbed.backends.kubernetes.probe_job import configmap, probe_job
from testbed.config.loader import LoadedCampaign
from testbed.core.errors import CampaignError
from testbed.execution.export.objects import CampaignVolume, ExportOptions, campaign_volume
from testbed.execution.treatment import RemoteProbe
from testbed.plan.model import Plan


def in_cluster(loaded: LoadedCampaign) -> bool:
    backend = loaded.campaign.backend
    return backend.kind == "kubernetes" and getattr(backend, "probes", "") == "cluster"


def check_shippable(loaded: LoadedCampaign, plan: Plan) -> None:
    """Refuse inputs a probe Job would not have (CampaignError, exit 2)."""
    if not in_cluster(loaded):
        return
    for treatment in plan.planned():
        config = plan.probe_configs[treatment.probe_key]
        at: tuple[str, ...] = ()
        if treatment.probe == "load" and config["dataset"].get("kind") == "file":
            at, name = ("load", "dataset", "path"), config["dataset"]["path"]
        elif treatment.probe == "ab" and config.get("prompts"):
            at, name = ("ab", "prompts"), config["prompts"]
        if at:
            origin = loaded.provenance.nearest(at)
            where = origin.describe() if origin else loaded.file
            raise CampaignError(
                f"{where}: {'.'.join(at)}: {name} is a file of this machine, which a probe Job"
                " of backend.probes: cluster does not get — use a synthetic dataset, or"
                " backend.probes: controller"
            )
    _volume(loaded, plan, "check")


def _volume(loaded: LoadedCampaign, plan: Plan, namespace: str) -> CampaignVolume:
    options = ExportOptions(namespace=namespace, image="", upload="")
    return campaign_volume(loaded, plan, options)


def probe_objects(
    loaded: LoadedCampaign, plan: Plan, run_id: str, namespace: str
) -> list[dict[str, Any]]:
    """What ``backend.probes: cluster`` adds to a run's objects: the campaign ConfigMap and
    each planned treatment's first probe Job (``testbed plan --manifests``); none otherwise."""
    if not in_cluster(loaded):
        return []
    volume = _volume(loaded, plan, namespace)
    backend = loaded.campaign.backend.model_dump(mode="json")
    objects = [configmap(run_id, namespace, volume.configmap["data"])]
    for treatment in plan.planned():
        workers = {w: plan.workers[w].config for w in treatment.workers}
        where = {"id": treatment.id, "dirname": treatment.dirname}
        objects.append(probe_job(run_id, namespace, where, 1, workers, backend, volume.items))
    return objects


def remote_probe(loaded: LoadedCampaign, plan: Plan, backend: Backend) -> RemoteProbe | None:
    """The runner of probe Jobs when the campaign asks for them, else None."""
    if not in_cluster(loaded):
        return None
    from testbed.backends.kubernetes import KubernetesBackend
    from testbed.execution.probe_jobs import ProbeJobs

    assert isinstance(backend, KubernetesBackend)
    volume = _volume(loaded, plan, backend.namespace)
    return ProbeJobs(backend, plan, volume.configmap["data"], volume.items)
