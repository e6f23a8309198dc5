"""A Kubernetes API server emulated in-process: ``testbed cluster emulate``.

It speaks the real REST API (CRUD, watch, selectors, status subresources, owner-reference
garbage collection, namespaces, CRDs, discovery and Table output) well enough for the
official client and kubectl. Objects live as dicts in a :class:`Store`; controllers
(scheduler, kubelet, workload controllers) run beside it in the same event loop and use
the store directly. docs/emulator.md says what is and is not emulated.
"""

from __future__ import annotations

from testbed.emulator.errors import ApiError
from testbed.emulator.nodes import ClusterShape
from testbed.emulator.server import Emulator
from testbed.emulator.store import Store, clone
from testbed.emulator.watchers import Event, Watch

__all__ = ["ApiError", "ClusterShape", "Emulator", "Event", "Store", "Watch", "clone"]
