"""A stack worker (``server: manifests``) on a cluster: apply, wait, reach, remove.

For one worker the stack is rendered with its values (``stack_render``), then applied:
CustomResourceDefinitions first, each waited for until ``Established`` (by WATCH), then
every other object in the order written, each through API discovery (any kind the cluster
serves, custom resources included). Before an object is created its reference goes into
the worker's journal (``stack_journal``), so even after a SIGKILL ``testbed cleanup`` knows
every object the stack may have made. Then the ``ready`` conditions are watched, all at
once, each with its own timeout (``stack_watch``); the endpoint is reached (``stack_reach``);
while the probes run the ready objects stay watched, and one that fails or goes resolves
``Handle.died``. Leaving deletes the objects in reverse order and waits until they are
gone. Only objects that carry this run's and worker's labels are ever replaced or deleted:
a CRD that was installed before the run is used and left as it was. With
``backend.cluster_objects: admin`` (an exported campaign) no cluster-scoped object is
written at all (``stack_scope``): the cluster's admin applied them from the export's
``admin.yaml``, and the runner's namespaced Role could not.

Two workers of one stack deployment (a matrix over its values) create objects of the same
names, so they take turns: a per-deployment lock is held from apply to removal.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import yaml

from testbed.backends.base import Handle
from testbed.backends.endpoints import stack_endpoint
from testbed.backends.kubernetes import conditions, stack_pods
from testbed.backends.kubernetes.names import (
    RUN,
    WORKER,
    label_value,
    run_namespace,
    worker_labels,
    worker_selector,
)
from testbed.backends.kubernetes.stack_journal import (
    JOURNALS,
    Journal,
    delete_refs,
    get_object,
    object_path,
    reference,
)
from testbed.backends.kubernetes.stack_reach import reach
from testbed.backends.kubernetes.stack_render import StackObject, render_stack
from testbed.backends.kubernetes.stack_scope import CRD, is_cluster_scoped
from testbed.backends.kubernetes.stack_watch import wait_ready, watch_serving, watch_until
from testbed.clients.kube import Kube
from testbed.clients.kube.rest import KindInfo
from testbed.config.backend_settings import KubernetesSettings
from testbed.config.stacks import StackDeployment
from testbed.core.errors import ClusterConflict, ClusterError, InputError, ServerStartError

CRD_INFO = KindInfo("apiextensions.k8s.io/v1", "customresourcedefinitions", namespaced=False)
CRD_TIMEOUT_S = 60.0
DISCOVERY_RETRY_S = 10.0  # a new CRD's kind may reach discovery a moment after Established


def render_worker(
    run_id: str,
    worker_id: str,
    deployment: StackDeployment,
    backend: KubernetesSettings,
    base_dir: Path,
) -> list[StackObject]:
    """The worker's objects, labelled with its run and worker (InputError at file:line)."""
    namespace = run_namespace(run_id, backend)
    context = {
        "namespace": namespace,
        "run_id": run_id,
        "worker": worker_id,
        "labels": worker_labels(run_id, worker_id),
    }
    return render_stack(deployment, base_dir, context)


class StackSite(Protocol):
    """What stack workers need of the run's Kubernetes backend (which owns them): stated
    here, so that this module does not import the backend that imports it."""

    run_id: str
    run_dir: Path
    base_dir: Path  # the campaign's folder: manifests' relative paths
    namespace: str
    settings: KubernetesSettings

    async def kube(self) -> Kube: ...
    async def ensure_run_objects(self) -> None: ...
    def in_cluster(self) -> bool: ...


class Stacks:
    """The stack workers of one run (owned by its ``KubernetesBackend``)."""

    def __init__(self, backend: StackSite) -> None:
        self.backend = backend
        self._locks: dict[str, asyncio.Lock] = {}

    @contextlib.asynccontextmanager
    async def provision(
        self, worker_id: str, deployment: StackDeployment, work_dir: Path
    ) -> AsyncIterator[Handle]:
        backend = self.backend
        objects = render_worker(
            backend.run_id, worker_id, deployment, backend.settings, backend.base_dir
        )
        await backend.ensure_run_objects()
        kube = await backend.kube()
        lock = self._locks.setdefault(deployment.name, asyncio.Lock())
        async with lock:
            work_dir.mkdir(parents=True, exist_ok=True)
            plain = [json.loads(json.dumps(o.obj)) for o in objects]
            (work_dir / "stack.yaml").write_text(yaml.safe_dump_all(plain, sort_keys=False))
            journal = Journal(backend.run_dir / JOURNALS / f"{worker_id}.jsonl")
            admin_owned = backend.settings.cluster_objects == "admin"
            worker = _Worker(
                kube, backend.namespace, backend.run_id, worker_id, journal, admin_owned
            )
            selector = worker_selector(backend.run_id, worker_id)  # not managed-by: Helm's
            try:
                placed = await worker.apply(objects)
                await wait_ready(kube, backend.namespace, selector, deployment, placed)
                died: asyncio.Future[str] = asyncio.get_running_loop().create_future()
                async with reach(
                    kube, backend.namespace, deployment, placed, backend.in_cluster(), died
                ) as where:
                    info = {
                        "namespace": backend.namespace,
                        "objects": [o.describe() for o in objects],
                        "url": where.base_url,
                        "cluster_url": where.cluster_url,
                        "version": f"stack {deployment.manifests}",
                    }
                    endpoint = stack_endpoint(deployment, where.base_url, where.metrics_urls)
                    serving = watch_serving(
                        kube, backend.namespace, selector, deployment, placed, died
                    )
                    watching = asyncio.ensure_future(serving)
                    try:
                        yield Handle(endpoint, died=died, info=info)
                    finally:
                        watching.cancel()
                        await asyncio.gather(watching, return_exceptions=True)
            finally:
                await asyncio.shield(worker.remove(work_dir))


class _Worker:
    """Applying, waiting for and removing one worker's objects."""

    def __init__(
        self,
        kube: Kube,
        namespace: str,
        run_id: str,
        worker_id: str,
        journal: Journal,
        admin_owned: bool = False,
    ) -> None:
        self.kube, self.namespace = kube, namespace
        self.run_id, self.worker_id = run_id, worker_id
        self.journal = journal
        #: ``backend.cluster_objects: admin``: the stack's cluster-scoped objects were applied
        #: by the cluster's admin (an export's admin.yaml); the run never writes them.
        self.admin_owned = admin_owned

    async def apply(self, objects: Sequence[StackObject]) -> list[tuple[StackObject, KindInfo]]:
        """Create every object (CRDs first, Established before the rest); each with the
        resource discovery found for it."""
        placed: list[tuple[StackObject, KindInfo]] = []
        defined = {str((o.obj.get("spec") or {}).get("group")) for o in objects if o.kind == CRD}
        for item in sorted(objects, key=lambda o: o.kind != CRD):  # stable: CRDs first
            if item.kind == CRD and await asyncio.to_thread(_served, self.kube, item):
                continue  # installed by the cluster's admin: used as it is, never written
            if self.admin_owned and is_cluster_scoped(item, list(objects)):
                if item.kind == CRD:  # not served: the admin's step was not done
                    raise ServerStartError(
                        f"{item.origin}: {item.describe()} is not installed, and the campaign's"
                        " cluster-scoped objects are the cluster admin's"
                        " (backend.cluster_objects: admin) — have them apply the export's"
                        " admin.yaml first"
                    )
                continue  # the admin's (admin.yaml): a namespaced Role cannot write it
            info = await self._discover(item, item.api_version.rpartition("/")[0] in defined)
            await self._create(item, info)
            placed.append((item, info))
            if item.kind == CRD:
                await self._established(item)
        return placed

    async def _discover(self, item: StackObject, new_kind: bool) -> KindInfo:
        """The resource serving ``item``; a kind of a CRD of this stack (``new_kind``) is
        given a moment to reach discovery."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (DISCOVERY_RETRY_S if new_kind else 0.0)
        while True:
            try:
                return await asyncio.to_thread(self.kube.info, item.api_version, item.kind)
            except InputError as exc:
                if loop.time() > deadline:
                    raise ServerStartError(f"{item.origin}: {item.describe()}: {exc}") from None
            await asyncio.sleep(0.5)  # a CRD of this stack may be reaching discovery

    async def _create(self, item: StackObject, info: KindInfo) -> None:
        body = json.loads(json.dumps(item.obj))
        if info.namespaced:
            body["metadata"].setdefault("namespace", self.namespace)
        else:
            body["metadata"].pop("namespace", None)
        namespace = body["metadata"].get("namespace")
        self.journal.note(reference(info, body))
        doing = f"create {item.describe()} ({item.origin})"
        try:
            await asyncio.to_thread(
                self.kube.call, "POST", info.collection(namespace), doing, body=body
            )
        except ClusterConflict:
            await self._replace(item, info, body)
        except ClusterError as exc:
            raise ServerStartError(f"the cluster refused the stack: {exc}") from exc

    async def _replace(self, item: StackObject, info: KindInfo, body: dict[str, Any]) -> None:
        """An object of that name exists: this worker's own (replaced), a CRD installed
        before the run (used as it is), or anything else (refused)."""
        meta = body["metadata"]
        path = object_path(info, meta.get("namespace"), meta["name"])
        current = await asyncio.to_thread(get_object, self.kube, path, f"get {item.describe()}")
        labels = ((current or {}).get("metadata") or {}).get("labels") or {}
        if current is not None and item.kind == CRD and labels.get(RUN) is None:
            return
        mine = {RUN: label_value(self.run_id), WORKER: label_value(self.worker_id)}
        if current is None or any(labels.get(k) != v for k, v in mine.items()):
            # another worker's, another run's (a worker id repeats across runs) or nobody's
            owner = labels.get(RUN) or "someone else"
            raise ServerStartError(
                f"{item.origin}: {item.describe()} already exists in"
                f" {meta.get('namespace') or 'the cluster'} and belongs to {owner}"
                " — remove it, or give the stack a namespace of its own"
            )
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        await asyncio.to_thread(
            self.kube.call, "PUT", path, f"replace {item.describe()}", body=body
        )

    async def _established(self, item: StackObject) -> None:
        def check(crd: Mapping[str, Any]) -> conditions.Reading:
            return conditions.established(crd)

        await watch_until(
            self.kube, CRD_INFO, None, item.name, None, check, CRD_TIMEOUT_S,
            f"{item.describe()} to be Established",
        )  # fmt: skip

    async def remove(self, work_dir: Path | None = None) -> None:
        """Delete what this worker made; first keep its pods' logs in ``work_dir/pods``."""
        if work_dir is not None:
            selector = worker_selector(self.run_id, self.worker_id)
            await asyncio.to_thread(
                stack_pods.keep_logs, self.kube, self.namespace, selector, work_dir
            )
        await delete_refs(self.kube, self.run_id, self.worker_id, self.journal.refs())
        self.journal.remove()


def _served(kube: Kube, crd: StackObject) -> bool:
    """Whether discovery already serves the kind CRD ``crd`` defines (an exported pipeline's
    admin applies a stack's CRDs; the runner may not even read CRDs)."""
    spec = crd.obj.get("spec") or {}
    versions = [v.get("name") for v in spec.get("versions") or [] if v.get("served", True)]
    kind = (spec.get("names") or {}).get("kind")
    if not versions or not kind:
        return False
    try:
        kube.info(f"{spec.get('group')}/{versions[0]}", str(kind), fresh=True)
    except (InputError, ClusterError):
        return False
    return True
