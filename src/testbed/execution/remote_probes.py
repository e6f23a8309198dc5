"""Probes run off this machine (``backend.probes: cluster``) from the pipeline's side: what
such a probe can be given, shipped to it once per run.

A probe run elsewhere sees the campaign and its case files through what execution ships
(:class:`ShippedCampaign`: the same ConfigMap data ``testbed export`` builds); the backend
runs it (:meth:`Backend.run_probe`). Files it cannot see — a load dataset file, A/B prompt
files — are refused before the run starts (exit 2, at the line naming them), never found
missing halfway through it.
"""

from __future__ import annotations

from testbed.backends.base import ShippedCampaign
from testbed.config.loader import LoadedCampaign
from testbed.core.errors import CampaignError
from testbed.execution.export.objects import ExportOptions, campaign_volume
from testbed.plan.model import Plan


def check_shippable(loaded: LoadedCampaign, plan: Plan) -> None:
    """Refuse inputs a probe run elsewhere would not have (CampaignError, exit 2)."""
    if not loaded.campaign.backend.remote_probes:
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
    shipped_campaign(loaded, plan)


def shipped_campaign(loaded: LoadedCampaign, plan: Plan) -> ShippedCampaign | None:
    """The campaign as its probes run elsewhere get it; None when they run here."""
    if not loaded.campaign.backend.remote_probes:
        return None
    # the namespace is the backend's to choose: only the data and its layout travel
    volume = campaign_volume(loaded, plan, ExportOptions(namespace="-", image="", upload=""))
    return ShippedCampaign(volume.configmap["data"], volume.items)
