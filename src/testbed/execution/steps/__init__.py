"""The user's steps of a run (TOPSAIL's orchestration): planned from the campaign by
:func:`planned_steps`, run stage by stage by :class:`~.runner.StepRunner`, each in its own
``steps/NNN__<phase>__<name>/`` folder."""

from __future__ import annotations

from collections.abc import Mapping

from testbed.config.loader import LoadedCampaign
from testbed.config.templating import PLANNING, PlannedStep, plan_steps

__all__ = ["PlannedStep", "planned_steps"]


def planned_steps(loaded: LoadedCampaign, run: Mapping[str, str] = PLANNING) -> list[PlannedStep]:
    """The campaign's steps rendered for ``run`` (placeholders while planning)."""
    return plan_steps(loaded.campaign, loaded.provenance, loaded.file, loaded.base_dir, run)
