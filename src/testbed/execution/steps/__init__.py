"""The user's steps of a run (TOPSAIL's orchestration): planned from the campaign by
:func:`planned_steps`, run stage by stage by :class:`~.runner.StepRunner`, each in its own
``steps/NNN__<phase>__<name>/`` folder."""

from __future__ import annotations

from collections.abc import Mapping

from testbed.config.backend_settings import KubernetesSettings
from testbed.config.loader import LoadedCampaign
from testbed.config.templating import PLANNING, PlannedStep, plan_steps
from testbed.core.errors import CampaignError

__all__ = ["PlannedStep", "check_steps", "planned_steps"]


def planned_steps(loaded: LoadedCampaign, run: Mapping[str, str] = PLANNING) -> list[PlannedStep]:
    """The campaign's steps rendered for ``run`` (placeholders while planning; a namespace
    the campaign names is known already)."""
    backend = loaded.campaign.backend
    given = backend.namespace if isinstance(backend, KubernetesSettings) else None
    if run is PLANNING and given:
        run = {**PLANNING, "namespace": given}
    return plan_steps(loaded.campaign, loaded.provenance, loaded.file, loaded.base_dir, run)


def check_steps(loaded: LoadedCampaign) -> None:
    """What ``validate``, ``plan`` and ``run`` refuse before anything starts (exit 2 with
    file:line): the steps' templates and commands, and ``execution.keep`` off a cluster."""
    steps = planned_steps(loaded)
    campaign = loaded.campaign
    captures = campaign.execution.capture.state or any(s.kind == "capture" for s in steps)
    if captures and not campaign.backend.runs_state:
        raise CampaignError(
            f"{loaded.file}: a state capture dumps what the backend runs, and backend:"
            f" {campaign.backend.kind} runs nothing — remove capture: [state] steps and"
            " execution.capture.state, or use backend: local or kubernetes"
        )
    if campaign.execution.capture.namespaces and not campaign.backend.cluster:
        raise CampaignError(
            f"{_where(loaded, ('execution', 'capture', 'namespaces'))}: capture.namespaces"
            " names a cluster's namespaces to dump; the"
            f" {campaign.backend.kind} backend has none — remove it, or use backend: kubernetes"
        )
    if campaign.execution.keep and not campaign.backend.keeps_servers:
        origin = loaded.provenance.nearest(("execution", "keep"))
        where = origin.describe() if origin else loaded.file
        raise CampaignError(
            f"{where}: execution.keep leaves a cluster's servers and stack running after the"
            f" run; the {campaign.backend.kind} backend's servers end with testbed — remove"
            " keep, or use backend: kubernetes"
        )


def _where(loaded: LoadedCampaign, path: tuple[str | int, ...]) -> str:
    origin = loaded.provenance.nearest(path)
    return origin.describe() if origin else loaded.file
