"""Probes run off this machine (``backend.probes: cluster``) from the pipeline's side: what
such a probe can be given, shipped to it once per run.

A probe run elsewhere sees the campaign and its case files through what execution ships
(:class:`ShippedCampaign`: the same ConfigMap data ``testbed export`` builds); the backend
runs it (:meth:`Backend.run_probe`). The files its treatments read — case files, a load
dataset's rows, sessions or trace, A/B prompts — travel with it; one it could not be given
(outside the campaign's folder, missing, over a ConfigMap's size) is refused before the run
starts (exit 2), never found missing halfway through it. The ``${env:}`` names its probe
configs reference travel as names (``env``): the backend gives the probe their values.
"""

from __future__ import annotations

import json

import yaml

from testbed.backends.base import ShippedCampaign
from testbed.config.loader import LoadedCampaign
from testbed.config.probe_settings import section_document
from testbed.core.secrets import names
from testbed.execution.export.objects import ExportOptions, campaign_volume
from testbed.plan.model import Plan


def check_shippable(loaded: LoadedCampaign, plan: Plan) -> None:
    """Refuse inputs a probe run elsewhere would not have (InputError, exit 2): a file its
    treatments read outside the campaign's folder, or missing, or too big to ship."""
    shipped_campaign(loaded, plan)


def shipped_campaign(loaded: LoadedCampaign, plan: Plan) -> ShippedCampaign | None:
    """The campaign as its probes run elsewhere get it; None when they run here."""
    if not loaded.campaign.backend.remote_probes:
        return None
    # only the data and its layout travel: the namespace is the backend's to choose
    volume = campaign_volume(loaded, plan, ExportOptions(namespace="-", image="", upload=""))
    # The probe's worker provisions nothing (it is given --endpoint URLs): the campaign as
    # loaded, not rewritten for an exported task's namespace ("-" here, which no namespace
    # field accepts).
    data = {
        **volume.configmap["data"],
        "campaign.yaml": yaml.safe_dump(loaded.document, sort_keys=False),
    }
    # the env names of every planned section, as its probe will read them (plan.json's form)
    sections = [section_document(plan.probe_configs[t.probe_key]) for t in plan.planned()]
    return ShippedCampaign(data, volume.items, tuple(names(json.dumps(sections))))
