"""The one place testbed imports the official ``kubernetes`` client (import-linter checks it).

:func:`connect` builds an ``ApiClient`` from a kubeconfig, a server URL and token, or the
in-cluster service account, and ``Kube.connect(spec)`` is the one way callers open a cluster;
:class:`Kube` creates, lists, watches and deletes objects as plain dicts, of the kinds
testbed knows by name and of any other kind the cluster serves (found by discovery);
:class:`Changes` streams watch events to asyncio; :class:`PortForward` puts a
pod's port on 127.0.0.1. Every API error leaves as a ``testbed.core.errors.Cluster*`` error.
"""

from __future__ import annotations

from testbed.clients.kube.changes import Changes
from testbed.clients.kube.connection import ConnectionSpec, connect
from testbed.clients.kube.portforward import PortForward
from testbed.clients.kube.rest import KINDS, Kube

__all__ = ["KINDS", "Changes", "ConnectionSpec", "Kube", "PortForward", "connect"]
