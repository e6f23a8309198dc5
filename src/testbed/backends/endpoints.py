"""Servers that someone else provisioned: ``testbed worker --endpoint NAME=URL``.

A probe Job of ``backend.probes: cluster`` runs next to servers the controller already
started; it is told their URLs and provisions nothing. Each URL is spoken to with the
protocols and the served model name the deployment's adapter declares, exactly as the
backend that started it would (:func:`adapter_endpoint`). ``server: external`` deployments
keep their own URL.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from testbed.backends.base import Backend, Handle, external_endpoint
from testbed.clients.endpoint import Endpoint
from testbed.config.deployments import AnyDeployment, ExternalDeployment, ServerDeployment
from testbed.config.stacks import StackDeployment
from testbed.core.errors import InputError
from testbed.servers.adapters import ServerAdapter, adapter_for


def adapter_endpoint(
    deployment: ServerDeployment,
    base_url: str,
    grpc_target: str | None = None,
    adapter: ServerAdapter[Any] | None = None,
) -> Endpoint:
    """The endpoint of a server of ``deployment``'s kind that answers at ``base_url``; its
    TGIS gRPC at ``grpc_target``, by default the same host on the kind's gRPC port.
    ``adapter``: the kind's, when the caller has looked it up already (a server launch)."""
    adapter = adapter or adapter_for(deployment.server)
    params = deployment.params
    grpc_port = adapter.container_grpc_port(params)
    if grpc_target is None and grpc_port is not None:
        grpc_target = f"{urlsplit(base_url).hostname}:{grpc_port}"
    return Endpoint(
        base_url=base_url.rstrip("/"),
        protocols=adapter.served_protocols(params),
        model=adapter.served_model_name(deployment),
        server_kind=deployment.server,
        tokenizer=None,
        metrics_path=adapter.metrics_path,
        grpc_target=grpc_target,
    )


def stack_endpoint(
    deployment: StackDeployment, base_url: str, metrics_urls: tuple[str, ...] = ()
) -> Endpoint:
    """The endpoint of a stack (``server: manifests``) that answers at ``base_url``: under
    the path its ``endpoint:`` declares (KServe's ``/openai``), with the protocols it
    declares, its model name and tokenizer, the pods of its metrics Service
    (``metrics_urls``, one each) if any."""
    metrics = deployment.metrics
    return Endpoint(
        base_url=base_url.rstrip("/") + deployment.endpoint.path,
        protocols=deployment.endpoint.protocols,
        model=deployment.model,
        server_kind=deployment.server,
        tokenizer=deployment.tokenizer,
        metrics_path=metrics.path if metrics else None,
        metrics_urls=metrics_urls,
    )


def parse_endpoints(values: list[str] | None) -> dict[str, str]:
    """``NAME=URL`` flags as a dict; a malformed one is an input error."""
    found: dict[str, str] = {}
    for value in values or []:
        name, sep, url = value.partition("=")
        if not sep or not name or not url.startswith(("http://", "https://")):
            raise InputError(
                f"--endpoint {value!r}: give DEPLOYMENT=URL, e.g. sim=http://10.0.0.5:8000"
            )
        if name in found:
            raise InputError(f"--endpoint {name} is given twice")
        found[name] = url
    return found


class EndpointsBackend(Backend):
    """Provisions nothing: each deployment is served at the URL given for it."""

    name = "endpoints"
    probe_job = True

    def __init__(self, urls: Mapping[str, str], base_dir: Path | None = None) -> None:
        self.urls = dict(urls)
        self.base_dir = base_dir or Path.cwd()

    def open_worker(
        self, worker_id: str, deployment: AnyDeployment, work_dir: Path
    ) -> AbstractAsyncContextManager[Handle]:
        """A URL given with ``--endpoint`` wins, even over an external deployment's own."""
        if deployment.name in self.urls:
            return self.provision(worker_id, deployment, work_dir)
        return super().open_worker(worker_id, deployment, work_dir)

    @contextlib.asynccontextmanager
    async def provision(
        self, worker_id: str, deployment: AnyDeployment, work_dir: Path
    ) -> AsyncIterator[Handle]:
        del work_dir
        name = deployment.name
        if name not in self.urls:
            raise InputError(
                f"worker {worker_id}: no --endpoint {name}=URL given for deployment {name}"
            )
        url = self.urls[name]
        if isinstance(deployment, StackDeployment):
            endpoint = stack_endpoint(deployment, url)  # its metrics Service is unreachable here
        elif isinstance(deployment, ExternalDeployment):
            own = external_endpoint(deployment, self.base_dir)
            endpoint = dataclasses.replace(own, base_url=url.rstrip("/"))
        else:
            endpoint = adapter_endpoint(deployment, url)
        yield Handle(endpoint, info={"url": url})
