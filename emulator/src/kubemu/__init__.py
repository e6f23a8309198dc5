"""A Kubernetes cluster emulated in-process: ``testbed cluster emulate``.

It speaks the real REST API (CRUD, watch, selectors, status subresources, owner-reference
garbage collection, namespaces, CRDs, discovery and Table output) well enough for the
official client and kubectl, and runs a control plane beside it: scheduler, workload
controllers and a kubelet that runs known images as local processes. docs/emulator.md says
what is and is not emulated, and where each part lives:

- ``apiserver/``: the HTTP side (:class:`Emulator` owns the store and the HTTPS site);
- ``storage/``: the :class:`Store`, watches, admission, CRDs, garbage collection;
- ``controllers/``, ``scheduler/``, ``kubelet/``: the control plane's components;
- ``machinery/``: what those share (controller loop, events, injected faults, handlers);
- ``standins/``: software a real cluster runs that testbed plays (TGI/TGIS, Datashim, KServe's
  InferenceService controller, a Gateway API implementation with llm-d's endpoint picker, vLLM
  played by the simulator);
- ``plane`` wires the components to an emulator; ``serve`` runs it in the foreground.

This module is the emulator's public face: the CLI and tests use these names.
"""

from __future__ import annotations

from kubemu.apiserver.nodes import ClusterShape
from kubemu.apiserver.server import Emulator
from kubemu.kubelet.container import KubeletSettings
from kubemu.kubelet.images import ImageRules
from kubemu.machinery.faults import FaultRule
from kubemu.plane import ControlPlane, PlaneSettings, attach
from kubemu.serve import serve_until_stopped
from kubemu.standins.kserve_images import KServeImages
from kubemu.standins.tgi import Launcher, TgiStandIn
from kubemu.standins.vllm_sim import vllm_sim_stand_in
from kubemu.storage.errors import ApiError
from kubemu.storage.objects import clone
from kubemu.storage.store import Store
from kubemu.storage.watchers import Event, Watch

__all__ = [
    "ApiError",
    "ClusterShape",
    "ControlPlane",
    "Emulator",
    "Event",
    "FaultRule",
    "ImageRules",
    "KServeImages",
    "KubeletSettings",
    "Launcher",
    "PlaneSettings",
    "Store",
    "TgiStandIn",
    "Watch",
    "attach",
    "clone",
    "serve_until_stopped",
    "vllm_sim_stand_in",
]
