"""Any kind the cluster serves, custom resources included, found by API discovery.

:class:`Kube` knows the kinds testbed itself creates; a scale test's template may hold any
object (a Run:ai TrainingWorkload, a PyTorchJob, a PodGroup). :class:`Dynamic` asks the API
which resource serves ``apiVersion``/``kind`` (``GET /apis/GROUP/VERSION``, as kubectl and the
official client's DynamicClient do, but for one group-version at a time and cached), then
creates, gets and deletes through the same signed requests as :class:`Kube`.
``create`` treats AlreadyExists as an answer, not an error: a resumed submitter meets its
own earlier objects.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from testbed.clients.kube.rest import KindInfo, Kube
from testbed.core.errors import ClusterConflict, ClusterNotFound, InputError


class Dynamic:
    """Discovery-backed object access over one :class:`Kube` connection (thread-safe)."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self._found: dict[tuple[str, str], KindInfo] = {}
        self._lock = threading.Lock()

    def info(self, api_version: str, kind: str) -> KindInfo:
        """The resource serving ``kind`` at ``api_version``; InputError when none does."""
        key = (api_version, kind)
        with self._lock:
            found = self._found.get(key)
        if found is not None:
            return found
        group, _, version = api_version.rpartition("/")
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        try:
            listing = self.kube.call("GET", path, f"discover {api_version}")
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

    def create(self, obj: Mapping[str, Any], namespace: str) -> tuple[dict[str, Any], bool]:
        """Create ``obj`` (in ``namespace`` when namespaced); ``(object, existed)`` — an
        object of that name that already exists is returned as it is, with True."""
        info = self.info(obj["apiVersion"], obj["kind"])
        body = dict(obj)
        meta = dict(body.get("metadata") or {})
        if info.namespaced:
            meta["namespace"] = namespace
        body["metadata"] = meta
        where = namespace if info.namespaced else None
        doing = f"create {obj['kind']} {meta['name']}"
        try:
            return self.kube.call("POST", info.collection(where), doing, body=body), False
        except ClusterConflict:
            existing = self.get(obj["apiVersion"], obj["kind"], meta["name"], namespace)
            if existing is None:  # deleted between the two calls: a real conflict
                raise
            return existing, True

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None
    ) -> dict[str, Any] | None:
        info = self.info(api_version, kind)
        path = f"{info.collection(namespace if info.namespaced else None)}/{name}"
        try:
            return self.kube.call("GET", path, f"get {kind} {name}")
        except ClusterNotFound:
            return None

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None) -> bool:
        """Delete one object, its dependents in the background; False when already gone."""
        info = self.info(api_version, kind)
        path = f"{info.collection(namespace if info.namespaced else None)}/{name}"
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        try:
            self.kube.call("DELETE", path, f"delete {kind} {name}", body=body)
        except ClusterNotFound:
            return False
        return True

    def ensure_namespace(self, name: str, labels: Mapping[str, str]) -> bool:
        """Create namespace ``name`` unless it exists; True when this call created it."""
        body = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": dict(labels)},
        }
        try:
            self.kube.call("POST", "/api/v1/namespaces", f"create namespace {name}", body=body)
        except ClusterConflict:
            return False
        return True
