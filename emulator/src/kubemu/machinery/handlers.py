"""The seam between the API server and the components that answer some of its requests.

A subresource that needs a running pod (``pods/NAME/log``, ``/exec``, ``/portforward``) is
answered by a handler the kubelet plugs into the API server; both sides use the handler's
shape and read boolean query parameters the same way, so both live here, below them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from aiohttp import web

#: A subresource handler: (request, namespace, name) → response.
SubresourceHandler = Callable[[web.Request, str | None, str], Awaitable[web.StreamResponse]]


class SubresourceHost(Protocol):
    """What serves subresources through handlers plugged in (the API server)."""

    def add_subresource(self, key: str, subresource: str, handler: SubresourceHandler) -> None:
        """Serve ``<key>/<name>/<subresource>`` (e.g. ``pods``, ``log``) with ``handler``."""


def query_flag(value: str | None) -> bool:
    """A boolean query parameter, as the API server reads one."""
    return value in ("1", "true", "True")
