"""What testbed's own servers (``hf``, the reference server, and ``sim``) share as adapters:
the ``testbed serve`` command, here or in testbed's image, and the protocols their
``protocols`` parameter chooses — TGIS's gRPC included."""

from __future__ import annotations

import sys
from typing import TypeVar

from testbed import __version__
from testbed.config.deployments import HfParams
from testbed.config.sim import SimParams
from testbed.servers.adapters.base import ServerAdapter, ServerProtocol

#: testbed's own servers choose their protocols with a ``protocols`` parameter.
OwnParams = TypeVar("OwnParams", bound=HfParams | SimParams)


class OwnServerAdapter(ServerAdapter[OwnParams]):
    """A kind served by ``testbed serve KIND``; subclasses give :meth:`args`."""

    default_image = f"testbed:{__version__}"

    def served_protocols(self, params: OwnParams) -> tuple[ServerProtocol, ...]:
        return tuple(params.protocols) or self.protocols

    def grpc_args(self, grpc_port: int) -> list[str]:
        return ["--grpc-port", str(grpc_port)]

    def local_command(self, args: list[str], host: str) -> list[str]:
        """``testbed`` with ``args`` as a child process of this interpreter."""
        return [sys.executable, "-m", "testbed", *args, "--host", host]

    def container_command(self) -> list[str]:
        return ["testbed"]

    def container_args(self, params: OwnParams, model: str, served_name: str) -> list[str]:
        grpc = self.container_grpc_port(params)
        return [
            *self.args(params, model, self.container_port, served_name),
            *(self.grpc_args(grpc) if grpc else []),
            "--host",
            "0.0.0.0",
        ]
