"""The external backend: nothing is provisioned; probes run against URLs that already serve."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from testbed.backends.base import Backend, Handle
from testbed.clients.endpoint import Endpoint


class ExternalBackend(Backend):
    """Every deployment is ``server: external`` with a ``url``."""

    name = "external"

    @contextlib.asynccontextmanager
    async def provision(
        self, worker_id: str, deployment: dict[str, Any], work_dir: Path
    ) -> AsyncIterator[Handle]:
        del worker_id, work_dir
        yield Handle(external_endpoint(deployment))


def external_endpoint(deployment: dict[str, Any]) -> Endpoint:
    """The endpoint of an ``external`` deployment; its api_key stays a ``${env:…}`` reference."""
    return Endpoint(
        base_url=str(deployment["url"]).rstrip("/"),
        protocols=(deployment.get("protocol", "openai"),),
        model=str(deployment.get("model") or ""),
        server_kind="external",
        tokenizer=deployment.get("tokenizer"),
        api_key=deployment.get("api_key"),
    )
