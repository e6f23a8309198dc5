"""The Kubernetes backend: each worker is a Deployment (one replica) and a Service.

A run first makes its namespace (or uses the campaign's), the Secrets its models need and,
with Datashim, its Datasets. A worker's objects are applied, then its pod is WATCHED until
Ready; whatever the cluster says instead ends the worker as a :class:`ServerStartError`
(an ERROR, exit 3) with the cluster's reason: Unschedulable with the scheduler's message
and what was requested, ErrImagePull/ImagePullBackOff, CrashLoopBackOff or OOMKilled with
the last log lines, or the startup timeout. The server's log is followed into
``server.log`` of the worker's directory. Probes reach the server through a port-forward
on 127.0.0.1, or through the Service when testbed runs inside the cluster. Leaving
:meth:`provision` deletes the worker's objects; the final cleanup deletes every object of
the run by label (and the run's own namespace), also after Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from testbed.backends.base import Backend, Handle, ProbeRun
from testbed.backends.kubernetes import manifests
from testbed.backends.kubernetes.capture import capture
from testbed.backends.kubernetes.launch import server_launch
from testbed.backends.kubernetes.lease import ClusterLease, holder_identity
from testbed.backends.kubernetes.names import (
    RUN,
    owns_namespace,
    run_namespace,
    run_selector,
    settings_of,
)
from testbed.backends.kubernetes.node_fit import infeasible_reason
from testbed.backends.kubernetes.probe_runner import ProbeJobs
from testbed.backends.kubernetes.rbac import admin_objects, rbac_objects
from testbed.backends.kubernetes.readiness import Lineage, follow_until_ready, watch_death
from testbed.backends.kubernetes.run_cleanup import (
    delete_run_objects,
    record_secret,
    recorded_secrets,
)
from testbed.backends.kubernetes.stack import Stacks
from testbed.backends.kubernetes.stack_validation import check_stacks
from testbed.backends.kubernetes.weights import run_secrets
from testbed.backends.kubernetes.worker_reach import reach
from testbed.clients.kube import ConnectionSpec, Kube
from testbed.clients.kube.logs import LogStream, follow_into
from testbed.config.backend_settings import BackendSettings, KubernetesSettings
from testbed.config.deployments import AnyDeployment, ServerDeployment
from testbed.config.stacks import StackDeployment
from testbed.core.errors import (
    ClusterAccessDenied,
    ClusterError,
    ClusterNotFound,
    InputError,
)
from testbed.core.secrets import resolve
from testbed.results.outcome import ProbeOutcome

#: In a run directory while objects of the run may exist in the cluster.
OBJECTS_MARKER = ".kubernetes-objects"


class KubernetesBackend(Backend):
    """Workers as pods of a cluster (one instance per run)."""

    name = "kubernetes"

    def __init__(
        self,
        run_dir: Path,
        backend: KubernetesSettings,
        base_dir: Path | None = None,
        keep: bool = False,
    ) -> None:
        self.run_dir = run_dir
        self.base_dir = base_dir or Path.cwd()  # the campaign's folder: relative CA bundles
        self.run_id = run_dir.name
        #: The campaign's ``backend:`` section as validated: its defaults are the model's.
        self.settings = backend
        self.keep = keep  # execution.keep: workers stay after the run (testbed cleanup DIR)
        self.namespace = run_namespace(self.run_id, self.settings)
        self._kube: Kube | None = None
        self._applied: set[tuple[str, str]] = set()  # shared objects applied by this run
        self._created = False  # whether this process applied anything (see _objects_marker)
        self._lock = asyncio.Lock()
        self._stacks = Stacks(self)  # server: manifests workers
        self._probes = ProbeJobs(
            self.kube, self.run_id, self.namespace, self.settings, self._will_apply_secret
        )

    @classmethod
    def for_run(
        cls, run_dir: Path, config: BackendSettings, base_dir: Path, keep: bool = False
    ) -> KubernetesBackend:
        return cls(run_dir, settings_of(config), base_dir, keep=keep)

    @classmethod
    def preflight(cls, config: BackendSettings, deployments: Sequence[AnyDeployment]) -> None:
        """The kubeconfig, context or ``${env:}`` token, and the ``${env:}`` keys of the
        Secrets the workers need (S3, hub token)."""
        settings = settings_of(config)
        Kube.connect(ConnectionSpec.from_backend(settings)).close()
        run_secrets(deployments, settings, resolve)

    #: Each stack's manifests render and hold what it names (:mod:`.stack_validation`).
    check_campaign = staticmethod(check_stacks)
    #: Least privilege for what this backend does for the campaign (:mod:`.rbac`).
    runner_rbac = staticmethod(rbac_objects)
    runner_admin = staticmethod(admin_objects)

    async def kube(self) -> Kube:
        if self._kube is None:
            spec = ConnectionSpec.from_backend(self.settings)
            self._kube = await asyncio.to_thread(Kube.connect, spec)
        return self._kube

    async def run_probe(
        self, run: ProbeRun, here: Callable[[], Awaitable[ProbeOutcome]]
    ) -> ProbeOutcome:
        """With ``probes: cluster`` a Job next to the servers runs it (:mod:`.probe_runner`)."""
        return await self._probes.run(run, here)

    def in_cluster(self) -> bool:
        access = self.settings.access
        if access == "auto":
            return bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
        return bool(access == "service")

    # -- the run's shared objects ---------------------------------------------------------
    async def prepare(self, deployments: Sequence[AnyDeployment]) -> list[str]:
        return await self._ensure_run(deployments)

    async def ensure_run_objects(self) -> None:
        """The run's namespace (a stack worker provisioned with prepare skipped)."""
        await self._ensure_run([])

    async def _ensure_run(self, deployments: Sequence[AnyDeployment]) -> list[str]:
        """Apply the shared objects ``deployments`` need that this run has not applied yet
        (the namespace, Secrets, Datasets): prepare does it for all; a worker provisioned
        with the prepare phase skipped does it for itself."""
        async with self._lock:
            kube = await self.kube()
            self._created = True  # before the first apply: objects may exist from now on
            with contextlib.suppress(OSError):  # the flag above still knows, in this process
                self._objects_marker().touch()
            objects = manifests.shared_objects(
                self.run_id,
                self.namespace,
                owns_namespace(self.settings),
                deployments,
                self.settings,
                resolve,
            )
            done = []
            for obj in objects:
                key = (obj["kind"], obj["metadata"]["name"])
                if key in self._applied:
                    continue
                if obj["kind"] == "Secret":  # cleanup deletes Secrets by name, never lists them
                    with contextlib.suppress(OSError):
                        record_secret(self._objects_marker(), key[1])
                try:
                    await asyncio.to_thread(kube.apply, obj)
                except ClusterNotFound as exc:
                    if obj["kind"] != "Dataset":
                        raise
                    raise ClusterNotFound(
                        f"this cluster does not serve Datasets ({obj['apiVersion']}): install"
                        " Datashim (datashim.io) in it, or set backend.datashim: false to copy"
                        " s3:// weights with an init container",
                        status=exc.status,
                        reason=exc.reason,
                    ) from exc
                self._applied.add(key)
                done.append(f"{obj['kind']} {obj['metadata']['name']} applied")
            label = ("Namespace", f"{self.namespace} labelled")
            existing = not owns_namespace(self.settings)
            if self.settings.datashim and existing and label not in self._applied:
                patch = {"metadata": {"labels": {manifests.DATASHIM_LABEL: "enabled"}}}
                await asyncio.to_thread(kube.patch, "Namespace", self.namespace, None, patch)
                self._applied.add(label)
                done.append(f"namespace {self.namespace} labelled for Datashim")
            return done

    @contextlib.asynccontextmanager
    async def exclusive(self, wait: bool, say: Callable[[str], None]) -> AsyncIterator[None]:
        """The cluster's Lease (``backend.lease``) for the whole run, when one is named."""
        settings = self.settings.lease
        if settings is None:
            yield
            return
        lease = ClusterLease(
            await self.kube(),
            settings.namespace,
            settings.name,
            holder_identity(self.run_id),
            settings.duration_s,
            say,
        )
        async with lease.held(wait):
            yield

    def step_env(self) -> dict[str, str]:
        """The run's namespace, and the kubeconfig testbed itself uses (a step passes
        ``--context {{ backend.context }}`` itself when the campaign names a context)."""
        env = {"NAMESPACE": self.namespace, "TESTBED_NAMESPACE": self.namespace}
        path = ConnectionSpec.from_backend(self.settings).kubeconfig_path()
        if path is not None and not self.settings.server:
            env["KUBECONFIG"] = str(path.resolve())
        return env

    async def capture_state(
        self, folder: Path, workers: Collection[str] | None = None, namespaces: Sequence[str] = ()
    ) -> list[str]:
        """The run's objects, events and pod logs, as kubectl shows them; each of
        ``namespaces`` whole, in ``namespace-<name>/``."""
        del workers  # a stack's objects belong to no worker: the whole run is dumped
        kube = await self.kube()
        selector = None if owns_namespace(self.settings) else run_selector(self.run_id)
        notes = await asyncio.to_thread(capture, kube, self.namespace, selector, folder)
        for name in namespaces:
            where = folder / f"namespace-{name}"
            notes += await asyncio.to_thread(capture, kube, name, None, where)
        return notes

    def worker_cost(self, config: AnyDeployment) -> float:
        """A pod uses the cluster's cores, not this machine's: only the probe runs here."""
        del config
        return 0.0

    async def infeasible(
        self, workers: Mapping[str, AnyDeployment]
    ) -> tuple[dict[str, str], list[str]]:
        """Workers no node of the cluster can hold, from the nodes' allocatable resources."""
        pods = {w: c for w, c in workers.items() if isinstance(c, ServerDeployment)}
        if not pods:
            return {}, []
        kube = await self.kube()
        try:
            nodes, _ = await asyncio.to_thread(kube.list_objects, "Node")
        except ClusterAccessDenied as exc:
            return {}, [f"capacity not checked against nodes (no permission to list them): {exc}"]
        reasons = {w: infeasible_reason(c, nodes) for w, c in pods.items()}
        return {w: r for w, r in reasons.items() if r}, []

    # -- one worker ---------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def provision(
        self, worker_id: str, deployment: AnyDeployment, work_dir: Path
    ) -> AsyncIterator[Handle]:
        if isinstance(deployment, StackDeployment):
            async with self._stacks.provision(worker_id, deployment, work_dir) as handle:
                yield handle
            return
        if not isinstance(deployment, ServerDeployment):  # open_worker answers external ones
            raise InputError(f"{deployment.name}: a {deployment.server} server is not provisioned")
        # The server's image, container, ports and probes, resolved once for every step below.
        launch = server_launch(deployment, self.settings)
        await self._ensure_run([deployment])
        kube = await self.kube()
        objects = manifests.worker(self.run_id, worker_id, launch, self.namespace)
        follower: LogStream | None = None
        death: asyncio.Task[None] | None = None
        try:
            applied = [await asyncio.to_thread(kube.apply, obj) for obj in objects]
            # this Deployment's own pods: a retry's objects carry the labels of the last
            # attempt's, whose pod may still be Terminating and reporting its failure
            lineage = Lineage(kube, self.namespace, str(applied[0]["metadata"]["uid"]))
            pod = await follow_until_ready(
                kube,
                self.namespace,
                self.run_id,
                worker_id,
                launch.title,
                self.settings,
                objects[0],
                lineage,
            )
            pod_name = str(pod["metadata"]["name"])
            work_dir.mkdir(parents=True, exist_ok=True)
            follower = follow_into(
                kube, self.namespace, pod_name, "server", work_dir / "server.log"
            )
            # Set by the pod's death (watch_death) or by a port-forward nothing answers.
            died: asyncio.Future[str] = asyncio.get_running_loop().create_future()
            async with reach(
                kube, self.namespace, pod_name, worker_id, launch, died, self.in_cluster()
            ) as (base_url, grpc_target):
                handle = Handle(
                    launch.endpoint(base_url, grpc_target),
                    died=died,
                    info={
                        "pod": pod_name,
                        "namespace": self.namespace,
                        "node": pod.get("spec", {}).get("nodeName"),
                        "image": launch.image,
                        "version": f"{deployment.server} image {launch.image}",
                    },
                )
                death = asyncio.ensure_future(
                    watch_death(kube, self.namespace, self.run_id, worker_id, pod, handle)
                )
                yield handle
        finally:
            if death is not None:
                death.cancel()
                await asyncio.gather(death, return_exceptions=True)
            if follower is not None:
                await asyncio.to_thread(follower.close)
            if not self.keep:
                await asyncio.shield(self._delete_worker(kube, objects))

    async def _delete_worker(self, kube: Kube, objects: list[dict[str, Any]]) -> None:
        for obj in objects:
            meta = obj["metadata"]
            with contextlib.suppress(ClusterError):
                await asyncio.to_thread(kube.delete, obj["kind"], meta["name"], meta["namespace"])

    # -- cleanup ------------------------------------------------------------------------
    def _objects_marker(self) -> Path:
        """A file in the run directory from the run's first apply until a cleanup succeeds:
        whether a failed cleanup can have left objects behind (across --resume too)."""
        return self.run_dir / OBJECTS_MARKER

    async def cleanup_leftovers(self, run_dir: Path) -> list[str]:
        """Delete every object labelled with this run, then the run's own namespace, and
        wait until the API has none of them left."""
        try:
            done = await self._cleanup()
        except ClusterError as exc:
            if not (self._created or self._objects_marker().exists()):  # nothing applied
                raise type(exc)(
                    f"{exc} (nothing of run {self.run_id} was created)",
                    status=exc.status,
                    reason=exc.reason,
                ) from exc
            raise type(exc)(
                f"{exc}; objects of run {self.run_id} may remain — remove them with"
                f" `testbed cleanup {run_dir}`",
                status=exc.status,
                reason=exc.reason,
            ) from exc
        self._created = False
        with contextlib.suppress(OSError):
            self._objects_marker().unlink(missing_ok=True)
        return done

    def remains(self, run_dir: Path) -> list[str]:
        del run_dir
        if not (self._created or self._objects_marker().exists()):
            return []  # nothing was applied
        if owns_namespace(self.settings):
            return [f"namespace {self.namespace} (the run's, with everything in it)"]
        return [f"objects labelled {RUN}={self.run_id} in namespace {self.namespace}"]

    def _will_apply_secret(self, name: str) -> None:
        """Secret ``name`` is about to be applied: cleanup deletes it by name, never lists."""
        self._created = True
        self._applied.add(("Secret", name))
        with contextlib.suppress(OSError):
            record_secret(self._objects_marker(), name)

    def _secrets(self) -> set[str]:
        """The Secrets this run applied: in this process, or recorded in its marker."""
        applied = {name for kind, name in self._applied if kind == "Secret"}
        return applied | recorded_secrets(self._objects_marker())

    async def _cleanup(self) -> list[str]:
        done = await delete_run_objects(
            await self.kube(),
            self.run_id,
            self.run_dir,
            self.namespace,
            owns_namespace(self.settings),
            self.settings.datashim,
            self._secrets(),
        )
        self._applied.clear()
        return done
