"""The plan's data: workers (one provisioned deployment each), treatments, and the
validated settings of each distinct probe section they run.

Plain slotted dataclasses, not pydantic models: a plan may hold 100,000 treatments. What
they hold of the campaign is typed: a worker its deployment's model, the plan each probe
section's settings model (:mod:`testbed.config.probe_settings`), validated once by the
planner and read by attribute everywhere after.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from testbed.config.deployments import AnyDeployment
from testbed.config.probe_settings import ProbeName, ProbeSettings, section_document
from testbed.core.errors import InputError
from testbed.core.secrets import redact


@dataclass(slots=True)
class Worker:
    """One server: treatments whose deployment resolves identically share it."""

    id: str
    deployment: str  # the deployment's name
    server: str  # sim, hf, vllm, tgi, tgis, external
    config: AnyDeployment  # the resolved deployment, validated once by the planner
    params: dict[str, Any] = field(default_factory=dict)  # deployment factor values
    settings: dict[str, Any] = field(default_factory=dict)  # params set explicitly (shown)

    @property
    def document(self) -> dict[str, Any]:
        """The resolved deployment as JSON: ``plan.json``'s ``config``, and what probes and
        skip rules read by the names a campaign file writes."""
        return self.config.model_dump(mode="json")


@dataclass(slots=True)
class Treatment:
    """One resolved point: a probe against one worker (two for ab, none for scale)."""

    index: int
    id: str  # short hash of the fully resolved configuration
    slug: str  # readable: deployment and factor values
    probe: ProbeName
    workers: tuple[str, ...]
    probe_key: str  # key of the resolved probe section in Plan.probe_configs
    params: dict[str, Any]  # factor values that shaped this treatment
    status: Literal["planned", "skipped"] = "planned"
    reason: str = ""

    @property
    def dirname(self) -> str:
        """``NNN__slug__hash``: ordered, readable, and unique."""
        return f"{self.index:03d}__{self.slug}__{self.id}"


@dataclass
class Plan:
    """The expansion of one campaign."""

    campaign: str
    workers: dict[str, Worker]
    treatments: list[Treatment]
    probe_configs: dict[str, ProbeSettings]  # Treatment.probe_key -> its probe's settings
    notes: list[str] = field(default_factory=list)

    def planned(self) -> list[Treatment]:
        return [t for t in self.treatments if t.status == "planned"]

    def only(self, ids: Iterable[str]) -> Plan:
        """The plan cut down to the treatments ``ids`` (``testbed worker``), each keeping
        its index and id; an unknown or skipped id is an input error."""
        wanted = set(ids)
        known = {t.id: t for t in self.treatments}
        for tid in sorted(wanted):
            if tid not in known:
                sample = ", ".join(t.id for t in self.planned()[:5])
                raise InputError(f"treatment {tid!r} is not in the plan; e.g. {sample}")
            if known[tid].status != "planned":
                raise InputError(f"treatment {tid} is skipped by the plan: {known[tid].reason}")
        treatments = [t for t in self.treatments if t.id in wanted]
        used = {w for t in treatments for w in t.workers}
        return Plan(
            self.campaign,
            {w: worker for w, worker in self.workers.items() if w in used},
            treatments,
            self.probe_configs,
            self.notes,
        )

    def to_json(self) -> dict[str, Any]:
        """The plan as a JSON document (``plan.json``, ``testbed plan --json``); secrets masked."""
        # dumped once per distinct section, not per treatment (100,000 share a few)
        sections = {key: section_document(s) for key, s in self.probe_configs.items()}
        document: dict[str, Any] = _redacted(
            {
                "campaign": self.campaign,
                "treatments": [
                    {
                        "index": t.index,
                        "id": t.id,
                        "dir": t.dirname,
                        "slug": t.slug,
                        "probe": t.probe,
                        "worker": t.workers[0] if len(t.workers) == 1 else None,
                        "workers": list(t.workers),
                        "status": t.status,
                        "reason": t.reason,
                        "params": t.params,
                        "config": sections[t.probe_key],
                    }
                    for t in self.treatments
                ],
                "workers": [
                    {
                        "id": w.id,
                        "deployment": w.deployment,
                        "server": w.server,
                        "params": w.params,
                        "settings": w.settings,
                        "config": w.document,
                    }
                    for w in self.workers.values()
                ],
                "notes": self.notes,
            }
        )
        return document


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    return value
