"""Claims backed by an S3 bucket (the emulator's Datashim): the bucket copied in at mount time.

Where Datashim's CSI driver would mount the bucket live, the process-kubelet copies every
object of it into the claim's directory (``<state>/pvc/<namespace>/<claim>``) before the
pod's containers start — the pod is ``ContainerCreating`` meanwhile, as it is while a real
volume mounts. A second pod on the same claim copies only what changed (sizes compared).
The bucket, endpoint and keys come from the Dataset the claim names (its ``secret-name``
Secret's ``accessKeyID``/``secretAccessKey``, or the same keys inline in ``spec.local``).
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kubefacts.buckets import copy_bucket
from kubefacts.errors import InfrastructureError, InputError, MissingDependency
from kubemu.kubelet.environment import Lookup
from kubemu.kubelet.sandbox import MountError
from kubemu.standins.datashim import KEY, SOURCE

#: The kinds :func:`fill` looks up besides the kubelet's own (kind → store key).
LOOKUP_KINDS = {"Dataset": KEY}


def bucket_claims(
    pod: Mapping[str, Any], volumes: Mapping[str, Path], lookup: Lookup
) -> list[tuple[str, Mapping[str, Any], Path]]:
    """``(volume name, Dataset, host directory)`` of each claim of ``pod`` a Dataset backs."""
    namespace = str(pod["metadata"].get("namespace") or "default")
    found = []
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        claim_ref = volume.get("persistentVolumeClaim")
        if not claim_ref or volume["name"] not in volumes:
            continue
        claim = lookup("PersistentVolumeClaim", namespace, str(claim_ref.get("claimName")))
        source = ((claim or {}).get("metadata") or {}).get("annotations", {}).get(SOURCE)
        if not source:
            continue
        dataset = lookup("Dataset", namespace, str(source))
        if dataset is None:
            raise MountError(
                f'MountVolume.SetUp failed for volume "{volume["name"]}":'
                f' dataset "{source}" not found'
            )
        found.append((str(volume["name"]), dataset, volumes[volume["name"]]))
    return found


async def fill(pod: Mapping[str, Any], volumes: Mapping[str, Path], lookup: Lookup) -> int:
    """Copy each bucket-backed claim of ``pod`` in; the number of objects (MountError)."""
    namespace = str(pod["metadata"].get("namespace") or "default")
    copied = 0
    for volume, dataset, directory in bucket_claims(pod, volumes, lookup):
        local = (dataset.get("spec") or {}).get("local") or {}
        try:
            keys = _keys(local, namespace, lookup)
            copied += await asyncio.to_thread(
                copy_bucket, str(local["bucket"]), directory, str(local["endpoint"]), keys
            )
        except (KeyError, InfrastructureError, InputError, MissingDependency) as exc:
            raise MountError(f'MountVolume.SetUp failed for volume "{volume}": {exc}') from exc
    return copied


def _keys(local: Mapping[str, Any], namespace: str, lookup: Lookup) -> tuple[str, str]:
    if local.get("accessKeyID") and local.get("secretAccessKey"):
        return str(local["accessKeyID"]), str(local["secretAccessKey"])
    name = str(local.get("secret-name"))
    secret = lookup("Secret", str(local.get("secret-namespace") or namespace), name)
    if secret is None:
        raise InputError(f'secret "{name}" not found')
    data = secret.get("data") or {}
    if "accessKeyID" not in data or "secretAccessKey" not in data:
        raise InputError(f'secret "{name}" needs the keys accessKeyID and secretAccessKey')
    return (
        base64.b64decode(data["accessKeyID"]).decode(),
        base64.b64decode(data["secretAccessKey"]).decode(),
    )
