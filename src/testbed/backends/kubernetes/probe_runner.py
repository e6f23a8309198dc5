"""``backend.probes: cluster``: each treatment's probe runs as a Job next to the servers.

The controller still provisions the servers (:class:`KubernetesBackend`); for a treatment
(:meth:`KubernetesBackend.run_probe`) it creates the probe Job (:mod:`.probe_job`), waits
for its pod by WATCH, and follows the pod's log: every stream line
(:mod:`testbed.results.stream`) is written into the treatment directory as it arrives —
records through the treatment's record writer, the probe's other files beside them — and
the streamed summary gives the verdict. So ledger, resume, reports and compare see the same
treatment directory as with probes run here. The ``${env:}`` values its probes need (header
secrets) reach the Job through a Secret of the run, deleted by name at cleanup.

A pod that is killed, fails or ends without its summary is that treatment's ERROR (exit 3)
with the reason and the last lines it printed; the records that arrived stay, and
``--resume`` runs the treatment again. The Job is deleted when the treatment ends, whatever
ended it; the campaign ConfigMap goes with the run's other objects at cleanup.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from testbed.backends.base import ProbeRun, ShippedCampaign
from testbed.backends.kubernetes.podstate import verdict_of
from testbed.backends.kubernetes.probe_job import (
    CONTAINER,
    configmap,
    env_secret,
    env_secret_name,
    probe_job,
    probe_selector,
)
from testbed.clients.kube import Changes, Kube
from testbed.clients.kube.logs import LogLines
from testbed.config.backend_settings import KubernetesSettings
from testbed.core.errors import ClusterError, InfrastructureError
from testbed.core.secrets import resolve
from testbed.results import stream
from testbed.results.outcome import ProbeOutcome
from testbed.results.verdict import Verdict

#: Keys of a treatment's summary.json that the controller writes itself.
_OWN_KEYS = ("schema_version", "id", "dir", "probe", "params", "workers", "attempt", "started",
             "duration_s", "records", "verdict")  # fmt: skip
NOISE_LINES = 20  # log lines that were not stream items, kept as evidence of an early end
END_WAIT_S = 30.0  # after the log ends: time for the pod to show how it ended
MAX_FOLLOWS = 5  # a log connection that drops while the pod runs is followed again


class ProbeJobs:
    """Runs treatments' probes as Jobs of the run (one instance per run, made by the
    backend on the first probe)."""

    def __init__(
        self,
        kube: Callable[[], Awaitable[Kube]],
        run_id: str,
        namespace: str,
        settings: KubernetesSettings,
        will_apply_secret: Callable[[str], None],
    ) -> None:
        self._kube, self.run_id, self.namespace = kube, run_id, namespace
        self.settings = settings  # the campaign's backend section
        self._will_apply_secret = will_apply_secret  # the backend's cleanup deletes it
        self._configmap_ready = False
        self._lock = asyncio.Lock()

    async def run(self, run: ProbeRun, here: Callable[[], Awaitable[ProbeOutcome]]) -> ProbeOutcome:
        """The treatment's probe as a Job with ``probes: cluster`` (else ``here``): its
        records and files written into ``run`` as they arrive; its outcome from the summary
        it streams last."""
        if not self.settings.remote_probes:
            return await here()
        if run.campaign is None:  # execution ships it whenever the settings say so
            raise InfrastructureError("probes: cluster, but the campaign was not shipped")
        kube = await self._kube()
        # The Job reaches the workers through their Services; a stack's URL is its own.
        urls = {
            w: str(h.info["cluster_url"])
            for w, h in run.handles.items()
            if h.info.get("cluster_url")
        }
        await self._ensure_configmap(kube, run.campaign)
        job = probe_job(
            self.run_id,
            self.namespace,
            {"id": run.treatment.id, "dirname": run.treatment.dirname},
            run.attempt,
            run.workers,
            self.settings,
            [dict(i) for i in run.campaign.items],
            urls,
            run.campaign.env,
        )
        name = str(job["metadata"]["name"])
        run.progress(f"probe Job {name}")
        await asyncio.to_thread(kube.create, job)
        try:
            selector = probe_selector(self.run_id, run.treatment.id, run.attempt)
            return await self._follow(kube, name, selector, run)
        finally:
            await asyncio.shield(self._delete(kube, name))

    async def _ensure_configmap(self, kube: Kube, campaign: ShippedCampaign) -> None:
        """The run's ConfigMap of the campaign and, when its probes resolve ``${env:}``
        names, its Secret of their values (read here, as a probe run here would)."""
        async with self._lock:
            if not self._configmap_ready:
                if campaign.env:
                    values = {name: resolve(f"${{env:{name}}}") for name in campaign.env}
                    self._will_apply_secret(env_secret_name(self.run_id))
                    secret = env_secret(self.run_id, self.namespace, values)
                    await asyncio.to_thread(kube.apply, secret)
                obj = configmap(self.run_id, self.namespace, campaign.data)
                await asyncio.to_thread(kube.apply, obj)
                self._configmap_ready = True

    async def _delete(self, kube: Kube, name: str) -> None:
        with contextlib.suppress(ClusterError):
            await asyncio.to_thread(kube.delete, "Job", name, self.namespace)

    async def _follow(self, kube: Kube, job: str, selector: str, run: ProbeRun) -> ProbeOutcome:
        ns = self.namespace
        changes = Changes(kube, "Pod", ns, selector)
        try:
            pod = await self._started(changes, job)
            pod_name = str(pod["metadata"]["name"])
            reader = _Reader(run)
            for _ in range(MAX_FOLLOWS):
                lines = LogLines(kube, ns, pod_name, CONTAINER)
                try:
                    async for line in lines:
                        reader.take(line)
                finally:
                    await asyncio.to_thread(lines.close)
                if reader.summary is not None:
                    where = {"job": job, "pod": pod_name, "node": pod["spec"].get("nodeName")}
                    return reader.outcome(job, where)
                pod, ended = await _ending(changes, pod_name, pod)
                if ended:
                    break
            raise InfrastructureError(
                f"probe Job {job}: pod {pod_name} {_how_it_ended(pod)} before the treatment"
                f" finished; {run.records.count} record(s) arrived and are kept" + reader.evidence()
            )
        finally:
            changes.close()

    async def _started(self, changes: Changes, job: str) -> dict[str, Any]:
        """The Job's pod once its container runs (or already ended); failures to start it
        (image pull, configuration, unschedulable, timeouts) raise with the cluster's word."""
        settings = self.settings
        loop = asyncio.get_running_loop()
        deadline = loop.time() + settings.scheduled_timeout_s + settings.ready_timeout_s
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise InfrastructureError(f"probe Job {job}: its pod did not start in time")
            event = await changes.next(remaining)
            if event is None:
                continue
            kind, pod = event
            if kind == "DELETED":
                raise InfrastructureError(f"probe Job {job}: pod {pod['metadata']['name']} was"
                                          " deleted before it started")  # fmt: skip
            if _container_state(pod) in ("running", "terminated"):
                return pod
            state = verdict_of(pod)
            if state.state == "failed":
                raise InfrastructureError(
                    f"probe Job {job}: {state.reason}: {state.message}".rstrip(": ")
                )


class _Reader:
    """Writes stream items into the treatment directory as they arrive."""

    def __init__(self, run: ProbeRun) -> None:
        self.run = run
        self.last_seq = 0
        self.summary: dict[str, Any] | None = None
        self.noise: collections.deque[str] = collections.deque(maxlen=NOISE_LINES)

    def take(self, line: str) -> None:
        item = stream.decode(line)
        if item is None:
            if line.strip():
                self.noise.append(line)
            return
        if item.kind == "record" and isinstance(item.data, dict):
            if item.seq > self.last_seq:  # a re-followed log repeats what was written
                self.run.records.write(item.data)
                self.last_seq = item.seq
        elif item.kind == "file":
            stream.write_file(self.run.out_dir, item.data)
        elif item.kind == "summary":
            self.summary = item.data if isinstance(item.data, dict) else {}

    def evidence(self) -> str:
        if not self.noise:
            return ""
        return f"; its last {len(self.noise)} log line(s):\n" + "\n".join(self.noise)

    def outcome(self, job: str, where: dict[str, Any]) -> ProbeOutcome:
        """The worker's verdict and probe summary (plus where it ran: ``probe_job``)."""
        summary = self.summary or {}
        if "verdict" not in summary:
            raise InfrastructureError(
                f"probe Job {job}: the worker ended without a treatment summary" + self.evidence()
            )
        sent, arrived = int(summary.get("records") or 0), self.run.records.count
        if sent != arrived:
            raise InfrastructureError(
                f"probe Job {job}: the worker wrote {sent} record(s) but {arrived} arrived"
                " through its log"
            )
        verdict = Verdict.model_validate(summary["verdict"])
        probe_summary = {k: v for k, v in summary.items() if k not in _OWN_KEYS}
        return ProbeOutcome(summary={**probe_summary, "probe_job": where}, verdict=verdict)


def _container_state(pod: Mapping[str, Any]) -> str:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == CONTAINER:
            return next(iter(status.get("state") or {"waiting": {}}), "waiting")
    return "waiting"


async def _ending(changes: Changes, name: str, pod: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """After the log ended: the pod's last state, and whether it ended (terminated, failed,
    deleted) — as opposed to a log connection that dropped while it runs."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + END_WAIT_S
    while not _ended(pod):
        remaining = deadline - loop.time()
        if remaining <= 0:
            return pod, False
        event = await changes.next(remaining)
        if event is None or event[1]["metadata"]["name"] != name:
            continue
        kind, pod = event
        if kind == "DELETED":
            pod = {**pod, "deleted": True}
    return pod, True


def _ended(pod: Mapping[str, Any]) -> bool:
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    return bool(
        pod.get("deleted")
        or meta.get("deletionTimestamp")
        or status.get("phase") in ("Succeeded", "Failed")
        or _container_state(pod) == "terminated"
    )


def _how_it_ended(pod: Mapping[str, Any]) -> str:
    deleted = pod.get("deleted") or (pod.get("metadata") or {}).get("deletionTimestamp")
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        done = (status.get("state") or {}).get("terminated")
        if done:
            code, reason = done.get("exitCode"), done.get("reason") or "Error"
            return f"{'was deleted and ' if deleted else ''}exited with code {code} ({reason})"
    return "was deleted" if deleted else "stopped streaming"
