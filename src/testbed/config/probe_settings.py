"""A probe's settings as one type: the validated section of each probe a plan holds.

A campaign's ``correctness:``, ``load:``, ``ab:`` and ``scale:`` sections are validated
into their models (:class:`CorrectnessProbe` once per suite, :class:`LoadProbe`,
:class:`AbProbe`, :class:`ScaleProbe`) once per distinct resolved value by the planner;
the plan keeps the models, every reader takes their attributes, and nothing validates a
section again. :data:`ProbeSettings` is their union (what ``Plan.probe_configs`` maps a
key to and what a :class:`~testbed.probes.base.ProbeContext` may carry), :data:`SETTINGS`
the model of each probe by name.

On disk (``plan.json``, ``testbed plan --json``) a section is :func:`section_document`:
its model dumped as JSON, defaults included, as the treatment's id hashes it.
"""

from __future__ import annotations

from typing import Any, Literal

from testbed.config.ab import AbProbe
from testbed.config.correctness import CorrectnessProbe
from testbed.config.load import LoadProbe
from testbed.config.scale import ScaleProbe

__all__ = ["PROBES", "SETTINGS", "ProbeName", "ProbeSettings", "section_document"]

ProbeName = Literal["correctness", "load", "ab", "scale"]
PROBES: tuple[ProbeName, ...] = ("correctness", "load", "ab", "scale")

#: One probe's validated settings (a correctness section is one suite's).
ProbeSettings = CorrectnessProbe | LoadProbe | AbProbe | ScaleProbe

#: The settings model of each probe, by the name of its campaign section.
SETTINGS: dict[ProbeName, type[ProbeSettings]] = {
    "correctness": CorrectnessProbe,
    "load": LoadProbe,
    "ab": AbProbe,
    "scale": ScaleProbe,
}


def section_document(section: ProbeSettings) -> dict[str, Any]:
    """The section as JSON data: every field, defaults included — what ``plan.json`` shows
    and what a treatment's id hashes (a change here changes every treatment id)."""
    return section.model_dump(mode="json")
