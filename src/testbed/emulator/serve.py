"""Run the emulator in the foreground until SIGINT or SIGTERM (``testbed cluster emulate``).

Controllers (scheduler, kubelet, workload controllers) attach through
``testbed.emulator.controllers.attach(emulator)`` when that module exists: it registers
its tasks and shutdown hooks on the :class:`Emulator` before the server starts.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from testbed.emulator.server import Emulator

CONTROLLERS = "testbed.emulator.controllers"


def attach_controllers(emulator: Emulator, settings: Any = None) -> bool:
    """Let the controllers package attach to ``emulator``; False when it is not there.

    ``settings`` (a ``controllers.plane.PlaneSettings``) is passed on when given.
    """
    try:
        module = importlib.import_module(CONTROLLERS)
    except ModuleNotFoundError as exc:
        if exc.name != CONTROLLERS:
            raise
        return False
    attach = getattr(module, "attach", None)
    if attach is None:
        return False
    if settings is None:
        attach(emulator)
    else:
        attach(emulator, settings)
    return True


async def serve_until_stopped(
    emulator: Emulator,
    kubeconfig: Path,
    *,
    controllers: bool = True,
    controller_settings: Any = None,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Start, write ``kubeconfig``, announce, serve until a signal, then stop cleanly."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if controllers:
        attach_controllers(emulator, controller_settings)
    try:
        await emulator.start()  # inside the try: a port in use still stops the controllers
        _tune_gc()
        emulator.write_kubeconfig(kubeconfig)
        message = (
            f"testbed cluster emulate: {emulator.shape.nodes} nodes at {emulator.url};"
            f" kubeconfig written to {kubeconfig}"
        )
        (on_ready or _print)(message)
        await stop.wait()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        await emulator.stop()


def _tune_gc() -> None:
    """Fewer cyclic-GC passes for a process whose heap is a large, long-lived store of dicts.

    Stored objects are acyclic JSON and live until deleted, yet every young-generation pass
    walks them: with the default thresholds the collector took about a third of the time
    of scheduling and starting 2,000 pods. The objects made while starting (nodes, imports)
    are frozen out of collection altogether.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


def _print(message: str) -> None:
    sys.stdout.write(message + "\n")
    sys.stdout.flush()
