"""One run at a time on a shared cluster: a coordination.k8s.io/v1 Lease, taken the way
client-go's leader election takes one.

TOPSAIL's bare-metal clusters are shared: "if someone else's job is on the cluster, yours is
queued". A run whose backend names ``lease: {namespace: …}`` takes the Lease before its
first phase, renews it every third of its duration while it runs, and releases it (clears
the holder) after its final cleanup. A second run meanwhile waits, saying "waiting for
<holder> since <time>", or with ``--no-wait`` ends at once (exit 3).

A crashed holder stops renewing: its Lease expires. As in client-go, expiry is judged on
this machine's monotonic clock — the record unchanged for ``leaseDurationSeconds`` since
this waiter first saw it — so clocks that disagree between machines cannot steal a lease.
Every write carries the resourceVersion it read: two waiters taking over together conflict
(409) and only one wins.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from kubefacts import times
from testbed.clients.kube import Kube
from testbed.core.clock import monotonic_ns
from testbed.core.errors import (
    ClusterAccessDenied,
    ClusterConflict,
    ClusterError,
    InfrastructureError,
)

#: Seconds between two looks at a held Lease while waiting (client-go's retry period).
RETRY_S = 1.0
#: Seconds between two "waiting for …" lines.
SAY_EVERY_S = 30.0


def micro_time() -> str:
    """Now as a Kubernetes MicroTime (RFC 3339 with microseconds, UTC)."""
    return times.now(times.MICROS)


def holder_identity(run_id: str) -> str:
    return f"{run_id}@{socket.gethostname()}"


class ClusterBusy(InfrastructureError):
    """The cluster's Lease is held by another run and the caller would not wait."""


@dataclass
class ClusterLease:
    kube: Kube
    namespace: str
    name: str
    holder: str
    duration_s: int
    say: Callable[[str], None]

    @contextlib.asynccontextmanager
    async def held(self, wait: bool) -> AsyncIterator[None]:
        """Take the Lease (waiting, or ClusterBusy), renew it, release it on exit."""
        await self.acquire(wait)
        renewer = asyncio.ensure_future(self._renew())
        try:
            yield
        finally:
            renewer.cancel()
            await asyncio.gather(renewer, return_exceptions=True)
            await asyncio.shield(self.release())

    async def acquire(self, wait: bool) -> None:
        await asyncio.to_thread(self._ensure_namespace)
        seen: tuple[Any, ...] | None = None
        seen_at = monotonic_ns()
        said_at: int | None = None
        while True:
            lease = await asyncio.to_thread(self.kube.get, "Lease", self.name, self.namespace)
            spec = (lease or {}).get("spec") or {}
            holder = spec.get("holderIdentity")
            if lease is not None and holder and holder != self.holder:
                record = (holder, spec.get("renewTime"), lease["metadata"]["resourceVersion"])
                if record != seen:
                    seen, seen_at = record, monotonic_ns()
                duration = float(spec.get("leaseDurationSeconds") or self.duration_s)
                if (monotonic_ns() - seen_at) / 1e9 <= duration:
                    since = spec.get("acquireTime") or spec.get("renewTime") or "?"
                    message = f"waiting for {holder} since {since} (Lease {self.where})"
                    if not wait:
                        raise ClusterBusy(f"the cluster is in use: {message}; --no-wait given")
                    if said_at is None or (monotonic_ns() - said_at) / 1e9 >= SAY_EVERY_S:
                        self.say(message)
                        said_at = monotonic_ns()
                    await asyncio.sleep(RETRY_S)
                    continue
                self.say(f"{holder} stopped renewing Lease {self.where}: taking it over")
            with contextlib.suppress(ClusterConflict):  # someone else wrote first: look again
                await asyncio.to_thread(self._take, lease)
                self.say(f"holding Lease {self.where} as {self.holder}")
                return

    @property
    def where(self) -> str:
        return f"{self.namespace}/{self.name}"

    def _ensure_namespace(self) -> None:
        try:
            missing = self.kube.get("Namespace", self.namespace) is None
        except ClusterAccessDenied:  # may not read namespaces: the Lease's own calls will tell
            return
        if missing:
            with contextlib.suppress(ClusterConflict):
                self.kube.create(
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}}
                )

    def _take(self, lease: dict[str, Any] | None) -> None:
        now = micro_time()
        spec = {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.duration_s,
            "acquireTime": now,
            "renewTime": now,
        }
        if lease is None:
            self.kube.create(
                {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": {**spec, "leaseTransitions": 0},
                }
            )
            return
        old = lease.get("spec") or {}
        if old.get("holderIdentity") != self.holder:
            spec["leaseTransitions"] = int(old.get("leaseTransitions") or 0) + 1
        self._put(lease, {**old, **spec})

    def _put(self, lease: dict[str, Any], spec: dict[str, Any]) -> None:
        body = {**lease, "spec": spec}  # carries the resourceVersion read: a race is a 409
        path = f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases/{self.name}"
        self.kube.call("PUT", path, f"update Lease {self.where}", body=body)

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(self.duration_s / 3)
            try:
                await asyncio.to_thread(self._renew_once)
            except ClusterError as exc:  # one missed renewal is not yet a lost lease
                self.say(f"could not renew Lease {self.where}: {exc}")

    def _renew_once(self) -> None:
        lease = self.kube.get("Lease", self.name, self.namespace)
        spec = (lease or {}).get("spec") or {}
        if lease is None or spec.get("holderIdentity") != self.holder:
            holder = spec.get("holderIdentity") or "nobody"
            self.say(f"Lease {self.where} was lost: now held by {holder}")
            return
        self._put(lease, {**spec, "renewTime": micro_time()})

    async def release(self) -> None:
        """Clear the holder (client-go's ReleaseOnCancel), if the Lease is still ours."""
        with contextlib.suppress(ClusterError):
            await asyncio.to_thread(self._release)

    def _release(self) -> None:
        lease = self.kube.get("Lease", self.name, self.namespace)
        spec = (lease or {}).get("spec") or {}
        if lease is None or spec.get("holderIdentity") != self.holder:
            return
        self._put(lease, {**spec, "holderIdentity": None, "renewTime": micro_time()})
        self.say(f"released Lease {self.where}")
