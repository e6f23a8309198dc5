"""An emulated cluster with its control plane, in a background event loop, for sync tests
(kubemu's and its users': the fake ships with the thing it fakes; needs the ``testing`` extra,
the official ``kubernetes`` client).

The official ``kubernetes`` client is synchronous, so the emulator runs in its own thread;
tests talk to it over HTTP exactly as a user would, through the kubeconfig it writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client, config

from kubemu import (
    ClusterShape,
    ControlPlane,
    Emulator,
    FaultRule,
    ImageRules,
    KubeletSettings,
    PlaneSettings,
    attach,
)


@dataclass
class Harness:
    emulator: Emulator
    plane: ControlPlane
    api: client.ApiClient
    loop: asyncio.AbstractEventLoop
    kubeconfig: Path

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def apps(self) -> client.AppsV1Api:
        return client.AppsV1Api(self.api)

    @property
    def batch(self) -> client.BatchV1Api:
        return client.BatchV1Api(self.api)

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` in the emulator's loop (to read its in-process state safely)."""

        async def run() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(10)


_NO_STATUS = client.V1PodStatus(conditions=[])


def wait_ready(h: Harness, pod: str, namespace: str = "default") -> None:
    """Wait until ``pod``'s Ready condition is True."""
    wait_for(
        f"pod {pod} to be ready",
        lambda: any(
            c.type == "Ready" and c.status == "True"
            for c in (h.core.read_namespaced_pod(pod, namespace).status or _NO_STATUS).conditions
            or []
        ),
    )


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie counts as dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_for(
    what: str, check: Callable[[], Any], timeout_s: float = 20.0, every_s: float = 0.05
) -> Any:
    """Poll ``check`` until it returns something truthy; fail naming ``what`` after the timeout."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}; last: {last!r}")


async def _abort_closing_tls() -> None:
    """Abort server TLS connections still waiting for the client's close_notify.

    The server has closed them (their SSL protocol is shutting down) but would wait up to 30 s
    for a client socket that this process may still hold (an ApiException keeps its response);
    closing the loop first would report them as leaked. A process exit ends them the same way.
    """
    from asyncio import selector_events

    await asyncio.sleep(0.1)
    for obj in gc.get_objects():
        # type(), not isinstance(): isinstance reads __class__, which some objects (torch's)
        # answer with a deprecation warning
        transport = selector_events._SelectorSocketTransport  # type: ignore[attr-defined]
        if issubclass(type(obj), transport) and not obj.is_closing():
            state = getattr(getattr(obj, "_protocol", None), "_state", None)
            if str(state).endswith("SHUTDOWN"):
                obj.abort()
    await asyncio.sleep(0)


@contextlib.contextmanager
def running_plane(
    tmp_path: Path,
    shape: ClusterShape | None = None,
    kubelet: KubeletSettings | None = None,
    faults: tuple[FaultRule, ...] = (),
    grace_s: float = 3.0,
    datashim: bool = False,
    images: ImageRules | None = None,
    gateway_stand_in: bool = False,
) -> Iterator[Harness]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="emulator", daemon=True)
    thread.start()
    emulator = Emulator(shape or ClusterShape(nodes=2, gpus_per_node=2))
    settings = PlaneSettings(
        state_dir=tmp_path / "state",
        kubelet=kubelet or KubeletSettings(backoff_s=0.5, backoff_max_s=2.0),
        faults=faults,
        datashim=datashim,
        images=images or ImageRules(),
        gateway_stand_in=gateway_stand_in,
    )

    async def start() -> ControlPlane:
        await emulator.start()
        return attach(emulator, settings, grace_s)

    plane = asyncio.run_coroutine_threadsafe(start(), loop).result(30)
    kubeconfig = emulator.write_kubeconfig(tmp_path / "kubeconfig")
    api = config.new_client_from_config(str(kubeconfig))  # type: ignore[no-untyped-call]
    try:
        yield Harness(emulator, plane, api, loop, kubeconfig)
    finally:
        api.close()
        # Connections the client dropped without returning them to its pool close when
        # collected; the server must see them close before its loop goes, or it warns.
        gc.collect()
        asyncio.run_coroutine_threadsafe(asyncio.sleep(0.2), loop).result(10)
        asyncio.run_coroutine_threadsafe(emulator.stop(), loop).result(60)
        asyncio.run_coroutine_threadsafe(_abort_closing_tls(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
