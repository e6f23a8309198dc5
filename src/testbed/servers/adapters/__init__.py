"""One adapter per server kind, picked by :func:`adapter_for` (a plain dictionary lookup).

Adapters import neither torch nor vLLM: they only build command lines, environments and
container specs, so backends and planners can use them anywhere.
"""

from __future__ import annotations

from typing import Any

from testbed.core.errors import InputError
from testbed.servers.adapters.base import ServerAdapter
from testbed.servers.adapters.hf import HfAdapter
from testbed.servers.adapters.sim import SimAdapter
from testbed.servers.adapters.tgi import TgiAdapter
from testbed.servers.adapters.tgis import TgisAdapter
from testbed.servers.adapters.vllm import VllmAdapter

_ADAPTERS: dict[str, type[ServerAdapter[Any]]] = {
    "sim": SimAdapter,
    "hf": HfAdapter,
    "vllm": VllmAdapter,
    "tgi": TgiAdapter,
    "tgis": TgisAdapter,
}


def adapter_for(kind: str) -> ServerAdapter[Any]:
    """The adapter of server kind ``kind`` (``sim``, ``hf``, ``vllm``, ``tgi``, ``tgis``)."""
    try:
        return _ADAPTERS[kind]()
    except KeyError:
        known = ", ".join(sorted(_ADAPTERS))
        raise InputError(f"no adapter for server kind {kind!r}; known: {known}") from None


__all__ = ["ServerAdapter", "adapter_for"]
