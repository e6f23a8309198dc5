"""testbed's reference server: plain transformers on the CPU, the yardstick for the others.

The only package of testbed that imports torch and transformers (import-linter checks it),
and only lazily: importing this package is cheap, the stacks load when a server starts or a
model is converted.
"""

from __future__ import annotations

from testbed.core.errors import MissingDependency
from testbed.servers.reference.settings import DEFAULT_MODEL, ReferenceSettings

#: The heavy stacks behind the ``reference`` extra.
_STACKS = ("torch", "transformers", "gguf", "accelerate", "safetensors")


def serve(
    settings: ReferenceSettings, source: str, host: str, port: int, grpc_port: int = 8033
) -> int:
    """Load the model ``source`` names, serve it until SIGTERM or Ctrl-C; the exit code.
    With ``tgis`` in ``settings.protocols`` TGIS is served over gRPC on ``grpc_port``."""
    try:
        from testbed.servers.reference.server import serve as run
    except ModuleNotFoundError as exc:
        if exc.name not in _STACKS:
            raise
        raise MissingDependency(exc.name, "reference") from exc
    return run(settings, source, host, port, grpc_port)


__all__ = ["DEFAULT_MODEL", "ReferenceSettings", "serve"]
