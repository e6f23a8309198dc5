"""A stack worker's journal and removal: what it may have created, deleted newest first.

Before a stack object is created its reference is appended to the worker's journal
(``RUN_DIR/stacks/WORKER.jsonl``, fsynced), so even after a SIGKILL ``testbed cleanup``
knows every object the stack may have made. Removal deletes them in reverse order (custom
objects before their CRDs) and waits until they are gone. Only objects that carry the run's
and the worker's labels are deleted: a CRD installed before the run is never touched.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from testbed.backends.kubernetes.names import RUN, WORKER, label_value
from testbed.clients.kube import Kube
from testbed.clients.kube.rest import KindInfo
from testbed.core.errors import ClusterError

GONE_TIMEOUT_S = 120.0
JOURNALS = "stacks"


class Journal:
    """The objects a worker's stack may have created, one JSON line each, written first."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def note(self, ref: Mapping[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(dict(ref)) + "\n")
            out.flush()
            os.fsync(out.fileno())

    def refs(self) -> list[dict[str, Any]]:
        if not self.path.is_file():
            return []
        lines = self.path.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def journals(run_dir: Path) -> list[Journal]:
    return [Journal(p) for p in sorted((run_dir / JOURNALS).glob("*.jsonl"))]


def reference(info: KindInfo, obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    return {
        "apiVersion": info.api_version,
        "kind": obj["kind"],
        "plural": info.plural,
        "namespaced": info.namespaced,
        "name": meta["name"],
        "namespace": meta.get("namespace") if info.namespaced else None,
    }


def _info(ref: Mapping[str, Any]) -> KindInfo:
    return KindInfo(str(ref["apiVersion"]), str(ref["plural"]), bool(ref["namespaced"]))


def object_path(info: KindInfo, namespace: str | None, name: str) -> str:
    return f"{info.collection(namespace if info.namespaced else None)}/{name}"


async def remove_journalled(kube: Kube, run_id: str, run_dir: Path) -> list[str]:
    """Delete what the journals of ``run_dir`` name (newest first), wait until it is gone;
    ``kind/name`` of each object deleted."""
    gone: list[str] = []
    for journal in journals(run_dir):
        refs = journal.refs()
        worker = str(journal.path.stem)
        gone += await delete_refs(kube, run_id, worker, refs)
        journal.remove()
    return gone


async def delete_refs(
    kube: Kube, run_id: str, worker_id: str, refs: Sequence[Mapping[str, Any]]
) -> list[str]:
    """Delete the run's objects of ``refs`` in reverse order; wait until none is left."""
    deleted: list[tuple[dict[str, Any], str]] = []
    mine = {RUN: label_value(run_id), WORKER: label_value(worker_id)}
    for ref in reversed(list(dict.fromkeys(json.dumps(r, sort_keys=True) for r in refs))):
        item = json.loads(ref)
        info, name = _info(item), str(item["name"])
        path = object_path(info, item.get("namespace"), name)
        current = await asyncio.to_thread(get_object, kube, path, f"get {item['kind']} {name}")
        labels = ((current or {}).get("metadata") or {}).get("labels") or {}
        if current is None or any(labels.get(k) != v for k, v in mine.items()):
            continue  # gone already, or not this worker's (a CRD installed before the run)
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        with contextlib.suppress(ClusterError):
            await asyncio.to_thread(
                kube.call, "DELETE", path, f"delete {item['kind']} {name}", body=body
            )
            deleted.append((item, path))
    await _wait_gone(kube, [path for _, path in deleted])
    return [f"{item['kind']}/{item['name']}" for item, _ in deleted]


def get_object(kube: Kube, path: str, doing: str) -> dict[str, Any] | None:
    try:
        return kube.call("GET", path, doing)
    except ClusterError as exc:
        if exc.status == 404:
            return None
        raise


async def _wait_gone(kube: Kube, paths: list[str]) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + GONE_TIMEOUT_S
    left = list(paths)
    while left:
        left = [
            p for p in left if await asyncio.to_thread(get_object, kube, p, f"get {p}") is not None
        ]
        if not left:
            return
        if loop.time() > deadline:
            raise ClusterError(
                f"stack objects still exist {GONE_TIMEOUT_S:.0f} s after deletion: {left}"
            )
        await asyncio.sleep(0.2)  # finalizers run on the server's side; no watch spans kinds
