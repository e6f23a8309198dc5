"""The external backend: nothing is provisioned; probes run against URLs that already serve."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from pathlib import Path

from testbed.backends.base import Backend, Handle, external_endpoint
from testbed.config.deployments import AnyDeployment
from testbed.core.errors import InputError

__all__ = ["ExternalBackend", "external_endpoint"]


class ExternalBackend(Backend):
    """Every deployment is ``server: external`` with a ``url`` (``Backend.open_worker``
    answers those). Relative paths of the deployments (``tls.ca_bundle``) start at
    ``base_dir`` (the campaign file's folder)."""

    name = "external"

    def __init__(self, base_dir: Path | None = None) -> None:
        self.base_dir = base_dir or Path.cwd()

    def provision(
        self, worker_id: str, deployment: AnyDeployment, work_dir: Path
    ) -> AbstractAsyncContextManager[Handle]:
        # Validation refuses these campaigns (ExternalBackend.refusals); a clear error anyway.
        del worker_id, work_dir
        raise InputError(
            f"backend external provisions nothing, but {deployment.name} needs a"
            f" {deployment.server} server — use `server: external` with a url"
        )
