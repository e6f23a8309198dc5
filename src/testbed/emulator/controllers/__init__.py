"""Controllers of the emulated cluster: workloads, the scheduler, and the plane running them.

``attach(emulator, settings=None)`` starts them beside an :class:`~testbed.emulator.Emulator`
(``testbed cluster emulate`` calls it before the server starts); see ``plane``. The import
is deferred so that the kubelet can use this package's small modules (quantities, events).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from testbed.emulator.controllers.plane import ControlPlane, PlaneSettings
    from testbed.emulator.server import Emulator


def attach(
    emulator: Emulator, settings: PlaneSettings | None = None, grace_s: float = 5.0
) -> ControlPlane:
    """Start the control plane beside ``emulator`` (see ``plane.attach``)."""
    from testbed.emulator.controllers.plane import attach as attach_plane

    return attach_plane(emulator, settings, grace_s)
