"""Datashim on the emulator (``testbed cluster emulate --datashim``): S3 Datasets as claims.

What Datashim's dataset operator and its admission webhook do for an S3 Dataset
(``spec.local.type: COS``, seed 004):

- the ``datasets.datashim.io`` CRD is served from the start;
- each Dataset gets a PersistentVolumeClaim of its own name that it owns (deleted with it),
  and a status as the operator writes it: ``provision: OK``, or ``Failed`` with the reason
  when its spec names no bucket or endpoint; ``caching: Disabled`` (no caching plugin);
- a pod created in a namespace labelled ``monitor-pods-datasets=enabled`` whose labels say
  ``dataset.N.id: NAME`` and ``dataset.N.useas: mount`` gets the claim NAME as a volume,
  mounted at ``/mnt/datasets/NAME`` in each container. Other ``useas`` values (``configmap``)
  are refused at admission: the emulator does not make their ConfigMaps.

Datashim's CSI driver mounts the bucket live (FUSE); the process-kubelet copies it into the
claim's directory instead, before the pod's containers start (``standins.datashim_mounts``). The
claim names its Dataset in the :data:`SOURCE` annotation, so the kubelet can find the
bucket, the endpoint and the Secret with the keys.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kubemu.machinery.loop import ControllerLoop, itself
from kubemu.storage.errors import ApiError, forbidden

if TYPE_CHECKING:
    from kubemu.storage.store import Store

GROUP = "datashim.io"
KEY = f"datasets.{GROUP}"
NAMESPACE_LABEL = "monitor-pods-datasets"
MOUNT_ROOT = "/mnt/datasets"
#: The claim's annotation naming the Dataset it serves (read by ``standins.datashim_mounts``).
SOURCE = "emulator.testbed.io/dataset"
_LABEL = re.compile(r"^dataset\.(\d+)\.(id|useas)$")

CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": KEY},
    "spec": {
        "group": GROUP,
        "names": {"kind": "Dataset", "plural": "datasets", "singular": "dataset"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}


def install(store: Store) -> DatasetController:
    """Serve the Dataset kind, admit pods as the webhook does; the operator to run."""
    if store.try_get("customresourcedefinitions.apiextensions.k8s.io", None, KEY) is None:
        store.create("customresourcedefinitions.apiextensions.k8s.io", CRD)
    store.admit_with("pods", lambda pod: mount_datasets(store, pod))
    return DatasetController(store)


class DatasetController:
    """Gives each Dataset its claim and its status."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.loop = ControllerLoop(store, "dataset", {KEY: itself}, self.reconcile)

    async def run(self) -> None:
        await self.loop.run()

    def reconcile(self, namespace: str, name: str) -> float | None:
        dataset = self.store.try_get(KEY, namespace, name)
        if dataset is None or dataset["metadata"].get("deletionTimestamp"):
            return None
        problem = spec_problem(dataset)
        if (
            problem is None
            and self.store.try_get("persistentvolumeclaims", namespace, name) is None
        ):
            self.store.create("persistentvolumeclaims", claim_for(dataset), namespace)
        status = {
            "provision": {"status": "Failed", "info": problem} if problem else {"status": "OK"},
            "caching": {"status": "Disabled", "info": "No DLF caching plugins are installed"},
        }
        if dataset.get("status") != status:
            self.store.mutate(
                KEY, namespace, name, lambda d: {**d, "status": status}, subresource="status"
            )
        return None


def spec_problem(dataset: Mapping[str, Any]) -> str | None:
    """Why an S3 Dataset cannot be provisioned (None when it can)."""
    local = (dataset.get("spec") or {}).get("local") or {}
    if str(local.get("type", "")).upper() != "COS":
        return f"type {local.get('type')!r} is not served by the emulator (only COS: S3)"
    missing = [f for f in ("bucket", "endpoint") if not local.get(f)]
    if not local.get("secret-name") and not (
        local.get("accessKeyID") and local.get("secretAccessKey")
    ):
        missing.append("secret-name (or accessKeyID and secretAccessKey)")
    return f"spec.local needs {', '.join(missing)}" if missing else None


def claim_for(dataset: Mapping[str, Any]) -> dict[str, Any]:
    meta = dataset["metadata"]
    readonly = str(((dataset.get("spec") or {}).get("local") or {}).get("readonly", "false"))
    return {
        "metadata": {
            "name": meta["name"],
            "labels": dict(meta.get("labels") or {}),
            "annotations": {SOURCE: meta["name"]},
            "ownerReferences": [
                {
                    "apiVersion": f"{GROUP}/v1alpha1",
                    "kind": "Dataset",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "accessModes": ["ReadOnlyMany" if readonly.lower() == "true" else "ReadWriteMany"],
            "resources": {"requests": {"storage": "9Gi"}},
            "storageClassName": "csi-s3",
        },
    }


def mount_datasets(store: Store, pod: dict[str, Any]) -> None:
    """The webhook's mutation of a new pod (see the module docstring)."""
    meta = pod["metadata"]
    namespace = store.try_get("namespaces", None, str(meta.get("namespace")))
    ns_labels = ((namespace or {}).get("metadata") or {}).get("labels") or {}
    if ns_labels.get(NAMESPACE_LABEL) != "enabled":
        return
    wanted: dict[str, dict[str, str]] = {}
    for label, value in (meta.get("labels") or {}).items():
        match = _LABEL.match(label)
        if match:
            wanted.setdefault(match[1], {})[match[2]] = str(value)
    spec = pod.setdefault("spec", {})
    for index in sorted(wanted, key=int):
        name, use = wanted[index].get("id"), wanted[index].get("useas", "mount")
        if not name:
            continue
        if use != "mount":
            raise _refused(meta, f"dataset.{index}.useas: {use!r} (the emulator mounts only)")
        volumes = spec.setdefault("volumes", [])
        if all(v.get("name") != name for v in volumes):
            volumes.append({"name": name, "persistentVolumeClaim": {"claimName": name}})
        for container in spec.get("containers") or []:
            mounts = container.setdefault("volumeMounts", [])
            if all(m.get("name") != name for m in mounts):
                mounts.append({"name": name, "mountPath": f"{MOUNT_ROOT}/{name}"})


def _refused(meta: Mapping[str, Any], why: str) -> ApiError:
    return forbidden(
        "pods",
        "",
        str(meta.get("name") or meta.get("generateName") or ""),
        f'admission webhook "mutate-pods.datashim.io" denied the request: {why}',
    )
