"""Typed helpers over the official client's REST layer: objects as plain dicts.

testbed builds its manifests as dicts (``backends.kubernetes.manifests``), so it talks to the
API in dicts too: the official ``ApiClient`` signs, serialises and sends each request (auth,
TLS, proxies exactly as kubectl's config says), and :class:`Kube` maps a kind to its URL.
The kinds testbed creates itself are known by name (:data:`KINDS`); any other kind — a scale
test's template may hold a Run:ai TrainingWorkload, a PyTorchJob, a PodGroup — is found by
API discovery when the call names its ``apiVersion`` (``GET /apis/GROUP/VERSION``, as
kubectl and the official DynamicClient do, one group-version at a time and cached).
Every API error leaves this module as a :mod:`testbed.core.errors` ``Cluster*`` error.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from testbed.clients.kube.connection import ConnectionSpec, connect
from testbed.clients.kube.errors import from_status, translate
from testbed.core.errors import ClusterConflict, ClusterError, ClusterNotFound, InputError


@dataclass(frozen=True)
class KindInfo:
    api_version: str
    plural: str
    namespaced: bool = True

    def collection(self, namespace: str | None) -> str:
        group, _, version = self.api_version.rpartition("/")
        root = f"/apis/{group}/{version}" if group else f"/api/{version}"
        if self.namespaced and namespace:
            return f"{root}/namespaces/{namespace}/{self.plural}"
        return f"{root}/{self.plural}"


#: The kinds testbed creates or reads, by ``kind``.
KINDS: dict[str, KindInfo] = {
    "Namespace": KindInfo("v1", "namespaces", namespaced=False),
    "Node": KindInfo("v1", "nodes", namespaced=False),
    "Pod": KindInfo("v1", "pods"),
    "Service": KindInfo("v1", "services"),
    "Secret": KindInfo("v1", "secrets"),
    "ConfigMap": KindInfo("v1", "configmaps"),
    "PersistentVolumeClaim": KindInfo("v1", "persistentvolumeclaims"),
    "Event": KindInfo("v1", "events"),
    "Deployment": KindInfo("apps/v1", "deployments"),
    "ReplicaSet": KindInfo("apps/v1", "replicasets"),
    "Job": KindInfo("batch/v1", "jobs"),
    "Dataset": KindInfo("datashim.io/v1alpha1", "datasets"),
    "Lease": KindInfo("coordination.k8s.io/v1", "leases"),
}

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"


def kind_info(kind: str) -> KindInfo:
    try:
        return KINDS[kind]
    except KeyError:
        raise ClusterError(
            f"testbed does not handle kind {kind!r}; known: {sorted(KINDS)}"
        ) from None


def list_items(answer: Mapping[str, Any], info: KindInfo) -> list[dict[str, Any]]:
    """A LIST answer's items, each with its ``kind`` and ``apiVersion`` back (a list's items
    carry neither)."""
    items: list[dict[str, Any]] = answer.get("items") or []
    kind = str(answer.get("kind", "")).removesuffix("List")
    for item in items:
        item.setdefault("kind", kind)
        item.setdefault("apiVersion", info.api_version)
    return items


class Kube:
    """One API connection (an ``ApiClient`` from :func:`~testbed.clients.kube.connect`);
    thread-safe, as the official client is."""

    def __init__(self, api_client: Any) -> None:
        self.api = api_client
        self._found: dict[tuple[str, str], KindInfo] = {}
        self._lock = threading.Lock()

    @classmethod
    def connect(cls, spec: ConnectionSpec | None = None) -> Kube:
        """The one way testbed opens a cluster: backend, scale probe and CLI alike."""
        return cls(connect(spec))

    def close(self) -> None:
        self.api.close()

    # -- kinds ---------------------------------------------------------------------------
    def info(self, api_version: str, kind: str, *, fresh: bool = False) -> KindInfo:
        """The resource serving ``kind`` at ``api_version``, by discovery; InputError when
        the cluster serves none. An answer is kept for the connection's life; ``fresh`` asks
        discovery again (a CRD another worker removed is no longer served)."""
        key = (api_version, kind)
        with self._lock:
            found = None if fresh else self._found.get(key)
        if found is not None:
            return found
        group, _, version = api_version.rpartition("/")
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        try:
            listing = self.call("GET", path, f"discover {api_version}")
        except ClusterNotFound:
            listing = {}
        for resource in listing.get("resources") or []:
            if resource.get("kind") == kind and "/" not in resource.get("name", "/"):
                found = KindInfo(api_version, resource["name"], bool(resource.get("namespaced")))
                with self._lock:
                    self._found[key] = found
                return found
        raise InputError(
            f"the cluster serves no {kind} at {api_version} — check apiVersion and kind, or"
            " install the CRD (kubectl get crd) / the operator that defines it"
        )

    def _kind(self, kind: str, api_version: str | None) -> KindInfo:
        return kind_info(kind) if api_version is None else self.info(api_version, kind)

    # -- raw ---------------------------------------------------------------------------
    def request(
        self,
        method: str,
        path: str,
        doing: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout: float | tuple[float, float] | None = 30.0,
    ) -> Any:
        """Send one request; return the urllib3 response (unread); raise Cluster* on non-2xx."""
        params = [(k, v) for k, v in (query or {}).items() if v is not None]
        try:
            _, url, headers, data, _ = self.api.param_serialize(
                method=method,
                resource_path=path,
                query_params=params,
                header_params={"Content-Type": content_type, "Accept": JSON},
                body=body,
                auth_settings=["BearerToken"],
            )
            response = self.api.call_api(
                method, url, header_params=headers, body=data, _request_timeout=timeout
            )
        except ClusterError:
            raise
        except Exception as exc:  # the client raises urllib3, ssl and socket errors as they are
            raise translate(exc, doing) from exc
        raw = response.response
        if not 200 <= response.status <= 299:
            raise from_status(response.status, raw.data, doing)
        return raw

    def call(self, method: str, path: str, doing: str, **kwargs: Any) -> dict[str, Any]:
        """A request whose answer is one JSON object."""
        raw = self.request(method, path, doing, **kwargs)
        result: dict[str, Any] = json.loads(raw.data or b"{}")
        return result

    # -- objects -------------------------------------------------------------------------
    def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        kind, meta = obj["kind"], obj["metadata"]
        path = kind_info(kind).collection(meta.get("namespace"))
        return self.call("POST", path, f"create {kind} {meta['name']}", body=dict(obj))

    def apply(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create ``obj``, or replace it when it exists (``--resume`` recreates workers)."""
        try:
            return self.create(obj)
        except ClusterConflict:
            current = self.get(
                obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace")
            )
            body = json.loads(json.dumps(obj))
            if current is not None:
                body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            kind, meta = obj["kind"], obj["metadata"]
            path = f"{kind_info(kind).collection(meta.get('namespace'))}/{meta['name']}"
            return self.call("PUT", path, f"replace {kind} {meta['name']}", body=body)

    def create_once(self, obj: Mapping[str, Any], namespace: str) -> tuple[dict[str, Any], bool]:
        """Create ``obj`` of any served kind (in ``namespace`` when namespaced);
        ``(object, existed)``: an object of that name that already exists is an answer, not
        an error (a resumed scale submitter meets its own earlier objects)."""
        info = self.info(obj["apiVersion"], obj["kind"])
        body = dict(obj)
        meta = dict(body.get("metadata") or {})
        if info.namespaced:
            meta["namespace"] = namespace
        body["metadata"] = meta
        where = namespace if info.namespaced else None
        doing = f"create {obj['kind']} {meta['name']}"
        try:
            return self.call("POST", info.collection(where), doing, body=body), False
        except ClusterConflict:
            existing = self.get(obj["kind"], meta["name"], namespace, obj["apiVersion"])
            if existing is None:  # deleted between the two calls: a real conflict
                raise
            return existing, True

    def ensure_namespace(self, name: str, labels: Mapping[str, str]) -> bool:
        """Create namespace ``name`` unless it exists; True when this call created it."""
        body = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": dict(labels)},
        }
        try:
            self.call("POST", "/api/v1/namespaces", f"create namespace {name}", body=body)
        except ClusterConflict:
            return False
        return True

    def get(
        self, kind: str, name: str, namespace: str | None = None, api_version: str | None = None
    ) -> dict[str, Any] | None:
        """One object, or None; ``api_version`` finds a kind testbed does not know by name."""
        path = f"{self._kind(kind, api_version).collection(namespace)}/{name}"
        try:
            return self.call("GET", path, f"get {kind} {name}")
        except ClusterNotFound:
            return None

    def list_objects(
        self,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[list[dict[str, Any]], str]:
        """``(items, resourceVersion)`` of a kind testbed knows by name."""
        return self.list_collection(kind_info(kind), namespace, label_selector, field_selector)

    def list_served(
        self, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> list[dict[str, Any]]:
        """The items of ``kind``; none when the cluster does not serve the kind at all (a
        custom resource whose CRD is not installed, e.g. Datashim's Dataset)."""
        try:
            return self.list_objects(kind, namespace, label_selector)[0]
        except ClusterNotFound:
            return []

    def warnings(self, namespace: str, name: str, limit: int = 3) -> list[str]:
        """The last ``limit`` distinct Warning events about the object ``name``, oldest first
        (``"FailedMount: MountVolume.SetUp failed …"``)."""
        items, _ = self.list_objects(
            "Event", namespace, field_selector=f"involvedObject.name={name},type=Warning"
        )
        items.sort(key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
        notes = list(dict.fromkeys(f"{e.get('reason')}: {e.get('message')}" for e in items))
        return notes[-limit:]

    def list_collection(
        self,
        info: KindInfo,
        namespace: str | None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[list[dict[str, Any]], str]:
        """``(items, resourceVersion)``; each item gets its ``kind`` and ``apiVersion`` back
        (a list's items carry neither)."""
        path = info.collection(namespace if info.namespaced else None)
        answer = self.call(
            "GET",
            path,
            f"list {info.plural}",
            query={"labelSelector": label_selector, "fieldSelector": field_selector},
        )
        version = str((answer.get("metadata") or {}).get("resourceVersion", ""))
        return list_items(answer, info), version

    def patch(
        self, kind: str, name: str, namespace: str | None, patch: Mapping[str, Any]
    ) -> dict[str, Any]:
        path = f"{kind_info(kind).collection(namespace)}/{name}"
        return self.call(
            "PATCH", path, f"patch {kind} {name}", body=dict(patch), content_type=MERGE_PATCH
        )

    def delete(
        self, kind: str, name: str, namespace: str | None = None, api_version: str | None = None
    ) -> bool:
        """Delete one object (dependents in the background); False when it was already gone."""
        path = f"{self._kind(kind, api_version).collection(namespace)}/{name}"
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        try:
            self.call("DELETE", path, f"delete {kind} {name}", body=body)
        except ClusterNotFound:
            return False
        return True

    def delete_labelled(
        self, kinds: Iterable[str], namespace: str | None, label_selector: str
    ) -> list[str]:
        """Delete every object of ``kinds`` matching ``label_selector``; ``kind/name`` of each."""
        gone = []
        for kind in kinds:
            for item in self.list_served(kind, namespace, label_selector):
                meta = item["metadata"]
                if self.delete(kind, meta["name"], meta.get("namespace")):
                    where = f" in {meta['namespace']}" if meta.get("namespace") else ""
                    gone.append(f"{kind}/{meta['name']}{where}")
        return gone

    def pod_log(
        self,
        name: str,
        namespace: str,
        container: str | None = None,
        *,
        tail_lines: int | None = None,
        previous: bool = False,
    ) -> str:
        """A container's log (the previous instance's with ``previous``); '' when there is none."""
        path = f"/api/v1/namespaces/{namespace}/pods/{name}/log"
        query = {"container": container, "tailLines": tail_lines}
        if previous:
            query["previous"] = "true"
        try:
            raw = self.request("GET", path, f"read the log of pod {name}", query=query)
        except ClusterError as exc:
            if exc.status in (400, 404):
                return ""  # not started yet, or no previous instance
            raise
        return bytes(raw.data).decode("utf-8", "replace")


def interrupt(response: Any) -> None:
    """End a streamed response (a watch, a followed log) that another thread is blocked
    reading: ``shutdown()`` wakes that read (urllib3 2.3 and later), ``close()`` ends it."""
    with contextlib.suppress(Exception):
        if hasattr(response, "shutdown"):
            response.shutdown()
        response.close()
