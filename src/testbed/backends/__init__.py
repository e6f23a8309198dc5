"""Backends provision deployments and hand out endpoints: local, kubernetes, external.

:func:`backend_class` is the one place that maps a campaign's ``backend.kind`` to its class;
each is imported on demand (the Kubernetes backend needs the kubernetes extra).
"""

from __future__ import annotations

import typing

if typing.TYPE_CHECKING:
    from testbed.backends.base import Backend

__all__ = ["backend_class"]


def backend_class(kind: str) -> type[Backend]:
    """The class of backend ``kind`` (``local``, ``kubernetes``, ``external``)."""
    if kind == "local":
        from testbed.backends.local import LocalBackend

        return LocalBackend
    if kind == "external":
        from testbed.backends.external import ExternalBackend

        return ExternalBackend
    from testbed.backends.kubernetes import KubernetesBackend

    return KubernetesBackend
