"""Serving ``fmaas.GenerationService`` (TGIS's gRPC interface) through grpcio.

The reference server implements a servicer; this module imports grpcio (the ``tgis``
extra, with the install hint when it is missing) and starts a ``grpc.aio`` server for a
servicer in the running event loop, so its handlers share the server's loop and state.
(The simulator's gRPC door is its own HTTP/2 server: :mod:`testbed.servers.sim.h2`.)
"""

from __future__ import annotations

from typing import Any

from testbed.core.errors import MissingDependency, ServerStartError


def modules() -> tuple[Any, Any, Any]:
    """``grpc``, ``generation_pb2`` and ``generation_pb2_grpc``, or the install hint."""
    try:
        import grpc

        from testbed.proto.fmaas import generation_pb2, generation_pb2_grpc
    except ImportError as exc:
        raise MissingDependency("grpcio", "tgis") from exc
    return grpc, generation_pb2, generation_pb2_grpc


async def start(servicer: Any, host: str, port: int, who: str) -> tuple[Any, int]:
    """A started gRPC server for ``servicer`` on ``host:port`` (0: a free port) and the port
    it bound; ``who`` names the server in errors."""
    grpc, _, pbg = modules()
    server = grpc.aio.server()
    pbg.add_GenerationServiceServicer_to_server(servicer, server)
    try:
        bound = server.add_insecure_port(f"{host}:{port}")
    except RuntimeError as exc:
        bound = 0
        cause = f": {exc}"
    else:
        cause = ""
    if not bound:
        raise ServerStartError(
            f"{who} cannot listen for gRPC on {host}:{port}{cause}; choose another --grpc-port"
        )
    await server.start()
    return server, bound


def code(name: str) -> Any:
    """The ``grpc.StatusCode`` called ``name``."""
    grpc, _, _ = modules()
    return getattr(grpc.StatusCode, name)
