"""The external backend: nothing is provisioned; probes run against URLs that already serve."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from testbed.backends.base import Backend, Handle
from testbed.clients.endpoint import Endpoint, Tls


class ExternalBackend(Backend):
    """Every deployment is ``server: external`` with a ``url``. Relative paths of the
    deployments (``tls.ca_bundle``) start at ``base_dir`` (the campaign file's folder)."""

    name = "external"

    def __init__(self, base_dir: Path | None = None) -> None:
        self.base_dir = base_dir or Path.cwd()

    @contextlib.asynccontextmanager
    async def provision(
        self, worker_id: str, deployment: dict[str, Any], work_dir: Path
    ) -> AsyncIterator[Handle]:
        del worker_id, work_dir
        yield Handle(external_endpoint(deployment, self.base_dir))


def external_endpoint(deployment: dict[str, Any], base_dir: Path) -> Endpoint:
    """The endpoint of an ``external`` deployment; its api_key stays a ``${env:…}`` reference."""
    tls = deployment.get("tls") or {}
    bundle = tls.get("ca_bundle")
    return Endpoint(
        base_url=str(deployment["url"]).rstrip("/"),
        protocols=(deployment.get("protocol", "openai"),),
        model=str(deployment.get("model") or ""),
        server_kind="external",
        tokenizer=deployment.get("tokenizer"),
        api_key=deployment.get("api_key"),
        grpc_target=deployment.get("grpc"),
        tls=Tls(
            verify=bool(tls.get("verify", True)),
            ca_bundle=str(base_dir / bundle) if bundle else None,
        ),
    )
