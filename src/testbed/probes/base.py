"""The contract between the execution pipeline and a probe.

A probe is an async function ``run(ctx) -> ProbeOutcome``. It writes raw records through
``ctx.records`` as they happen (never only in memory), writes any extra artifacts into
``ctx.out_dir``, and returns its summary and verdict. It raises
:class:`~testbed.core.errors.InfrastructureError` when the server is unreachable or dies,
so that the pipeline reports ERROR, never FAIL.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from testbed.clients.endpoint import Endpoint
from testbed.results.files import RecordWriter
from testbed.results.outcome import ProbeOutcome

if TYPE_CHECKING:  # only annotations: `testbed load` need not import the campaign's schema
    from testbed.config.backend_settings import KubernetesSettings
    from testbed.config.probe_settings import ProbeSettings

__all__ = ["ProbeContext", "ProbeOutcome", "Settings"]

#: The settings model of the probe a context is for: a probe's ``run`` takes
#: ``ProbeContext[LoadProbe]`` (its own model), the pipeline passes ``ProbeSettings``.
Settings = TypeVar("Settings", bound="ProbeSettings")


@dataclass
class ProbeContext(Generic[Settings]):
    """Everything a probe needs, passed explicitly."""

    endpoints: Mapping[str, Endpoint]  # deployment name -> endpoint (ab has two)
    config: Settings  # the probe's own section of the campaign, validated by the planner
    out_dir: Path  # the treatment directory
    records: RecordWriter  # records.jsonl of the treatment
    seed: int = 0
    params: Mapping[str, Any] = field(default_factory=dict)  # the treatment's factor values
    deployment: Mapping[str, Any] = field(default_factory=dict)  # resolved deployment config
    base_dir: Path = Path()  # relative paths of the campaign (case files, datasets) start here
    progress: Callable[[str], None] = lambda _msg: None  # one-line status for the live display
    # the campaign's backend section (kind, namespace, context, kubeconfig …): the scale
    # probe reaches the cluster itself, since it has no worker
    cluster: KubernetesSettings | None = None  # None: the campaign's backend is no cluster
