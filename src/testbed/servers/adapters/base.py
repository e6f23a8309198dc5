"""The adapter seam: how one server kind turns generic deployment parameters into a process.

Each kind (``sim``, ``hf``, ``vllm``, ``tgi``, ``tgis``) has one adapter that knows its
flags, environment, container image, readiness URL and metrics path; what is a plain fact
of the kind (protocols, where it runs, what its image carries) is its row of the capability
table ``config.server_kinds``, which adapters, backends and validation all read. Backends
ask the adapter or the table and never branch on the kind themselves: the local backend calls
:meth:`ServerAdapter.command` and :meth:`ServerAdapter.env` for a child process, the
Kubernetes backend :meth:`ServerAdapter.container` for a pod's container.

Adapters read the validated models of ``config.deployments``: ``deployment`` is the resolved
deployment, ``params`` its ``params`` section — the kind's own class (``HfParams``,
``VllmParams`` …, ``SimParams``): each adapter is generic in the class it reads, so the
defaults are the model's, never restated here.
"""

from __future__ import annotations

import abc
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from testbed.config.deployments import ServerDeployment, ServerParams
from testbed.config.server_kinds import ServerProtocol, server_kind
from testbed.config.sim import SimParams
from testbed.servers.models import parse_source

__all__ = ["GRPC_PORT", "ServerAdapter", "ServerProtocol"]

#: The params class an adapter reads: its kind's own.
Params = TypeVar("Params", bound=ServerParams | SimParams)
#: The port TGIS serves gRPC on in its image; testbed's own servers use it in theirs too.
GRPC_PORT = 8033


class ServerAdapter(abc.ABC, Generic[Params]):
    """One server kind. Subclasses set the class attributes and build the command line."""

    kind: ClassVar[str]
    #: GET this path until it answers 200 to know the server is ready.
    readiness_path: ClassVar[str] = "/health"
    #: Prometheus metrics, or None when the server has none.
    metrics_path: ClassVar[str | None] = "/metrics"
    #: The port the server listens on inside its container image.
    container_port: ClassVar[int] = 8000
    #: Image used when the deployment names none (``repository:tag``).
    default_image: ClassVar[str] = ""

    @property
    def protocols(self) -> tuple[ServerProtocol, ...]:
        """The protocols the kind serves by default (its row of ``config.server_kinds``)."""
        return server_kind(self.kind).protocols

    def served_protocols(self, params: Params) -> tuple[ServerProtocol, ...]:
        """The protocols a deployment with ``params`` serves (the kind's, unless the kind
        lets its ``protocols`` parameter choose)."""
        del params
        return self.protocols

    def grpc_args(self, grpc_port: int) -> list[str]:
        """Arguments of a local child process that serves tgis on ``grpc_port``."""
        raise NotImplementedError(f"{self.kind} servers speak no gRPC on this machine")

    def container_grpc_port(self, params: Params) -> int | None:
        """The port a container of this kind serves TGIS's gRPC on (None: it does not)."""
        return GRPC_PORT if "tgis" in self.served_protocols(params) else None

    @abc.abstractmethod
    def args(self, params: Params, model: str, port: int, served_name: str) -> list[str]:
        """The server's own arguments (no interpreter, no host) for ``model`` on ``port``."""

    def command(self, params: Params, model_path: Path | None, host: str, port: int) -> list[str]:
        """The argv of a local child process serving on ``host:port``."""
        raise NotImplementedError(f"{self.kind} servers run only in a cluster")

    def env(self, params: Params, gpus: int = 0) -> dict[str, str]:
        """Environment of a local child process beyond the deployment's own ``env``; ``gpus``
        is how many devices the local backend gave it (0: CPU only)."""
        del gpus
        return self.container_env(params)

    def served_model_name(self, deployment: ServerDeployment) -> str:
        """The model name requests must carry (``/v1/models``)."""
        return parse_source(deployment.model).served_name

    def container(self, deployment: ServerDeployment, model: str) -> dict[str, Any]:
        """A Kubernetes container spec (image, args, env, ports, readiness probe) that serves
        ``model`` (a path inside the pod, or a hub id); resources and volumes are the
        backend's business."""
        params: Params = deployment.params  # type: ignore[assignment]  # the kind's own class
        env = {**self.container_env(params), **own_env(params)}
        spec: dict[str, Any] = {
            "name": "server",
            "image": deployment.image or self.default_image,
            "args": self.container_args(params, model, self.served_model_name(deployment)),
            "env": [{"name": k, "value": str(v)} for k, v in sorted(env.items())],
            "ports": [
                {"name": "http", "containerPort": self.container_port},
                *(
                    [{"name": "grpc", "containerPort": grpc}]
                    if (grpc := self.container_grpc_port(params))
                    else []
                ),
            ],
            "readinessProbe": {
                "httpGet": {"path": self.readiness_path, "port": self.container_port},
                "periodSeconds": 5,
                "failureThreshold": 3,
            },
        }
        entry = self.container_command()
        if entry:
            spec["command"] = entry
        return spec

    def container_command(self) -> list[str]:
        """The image's entry point to use instead of its default (empty: keep the default)."""
        return []

    def container_args(self, params: Params, model: str, served_name: str) -> list[str]:
        return self.args(params, model, self.container_port, served_name)

    def container_env(self, params: Params) -> dict[str, str]:
        """Environment the server needs wherever it runs (a pod or a local process)."""
        del params
        return {}


def own_env(params: ServerParams | SimParams) -> dict[str, str]:
    """The deployment's own ``params.env`` (the simulator takes none)."""
    return dict(params.env) if isinstance(params, ServerParams) else {}


def flag(name: str, value: Any) -> list[str]:
    """``[name, str(value)]``, or nothing when the value is None (the server's default)."""
    return [] if value is None else [name, str(value)]


def switch(name: str, on: Any) -> list[str]:
    """``[name]`` when ``on`` is true."""
    return [name] if on else []


def extra(params: ServerParams) -> list[str]:
    """``extra_args``, appended verbatim."""
    return list(params.extra_args)
