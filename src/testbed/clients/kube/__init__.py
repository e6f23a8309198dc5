"""The one place testbed imports the official ``kubernetes`` client (import-linter checks it).

:func:`connect` builds an ``ApiClient`` from a kubeconfig, a server URL and token, or the
in-cluster service account; :class:`Kube` creates, lists, watches and deletes objects as
plain dicts; :class:`Changes` streams watch events to asyncio; :class:`PortForward` puts a
pod's port on 127.0.0.1. Every API error leaves as a ``testbed.core.errors.Cluster*`` error.
"""

from __future__ import annotations

from testbed.clients.kube.changes import Changes
from testbed.clients.kube.connection import ConnectionSpec, connect
from testbed.clients.kube.portforward import PortForward
from testbed.clients.kube.rest import KINDS, Kube

__all__ = ["KINDS", "Changes", "ConnectionSpec", "Kube", "PortForward", "connect"]
