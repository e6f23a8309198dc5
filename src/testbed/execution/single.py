"""Provisioning one deployment of a campaign outside a run (``testbed record``).

The deployment is resolved exactly as a run would resolve it (presets, ``--set``,
``extends``, defaults: the plan's worker config), prepared and started by the campaign's own
backend, and released on the way out — also on error or Ctrl-C.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed.backends.base import Handle
from testbed.config.deployments import AnyDeployment
from testbed.config.loader import LoadedCampaign
from testbed.config.server_kinds import provisioned
from testbed.core.errors import InputError
from testbed.execution.pipeline import make_backend
from testbed.plan.expand import expand
from testbed.results.rundir import RunDir


@dataclass
class Provisioned:
    """A running deployment."""

    worker_id: str
    deployment: str
    config: AnyDeployment  # the resolved deployment (``document``: what a probe reads)
    handle: Handle

    @property
    def document(self) -> dict[str, Any]:
        """The deployment as JSON, by the names a campaign writes (what probes and skip
        rules read as ``ctx.deployment``)."""
        return self.config.model_dump(mode="json")


def resolved_deployment(loaded: LoadedCampaign, name: str) -> tuple[str, AnyDeployment]:
    """The first worker of deployment ``name`` in the campaign's plan: (worker id, config)."""
    plan = expand(loaded)
    for worker in plan.workers.values():
        if worker.deployment == name:
            return worker.id, worker.config
    known = sorted({w.deployment for w in plan.workers.values()})
    raise InputError(f"deployment {name!r} is not in the plan; known: {', '.join(known)}")


@contextlib.asynccontextmanager
async def provision_one(
    loaded: LoadedCampaign, name: str, work_dir: Path
) -> AsyncIterator[Provisioned]:
    """Start deployment ``name`` with the campaign's backend; logs go under ``work_dir``."""
    worker_id, config = resolved_deployment(loaded, name)
    work_dir.mkdir(parents=True, exist_ok=True)
    backend = make_backend(loaded, RunDir(work_dir))
    if provisioned(config):
        await backend.prepare([config])
    try:
        async with backend.open_worker(
            worker_id, config, work_dir / "workers" / worker_id
        ) as handle:
            yield Provisioned(worker_id, name, config, handle)
    finally:
        await backend.cleanup_leftovers(work_dir)
