"""Removing a run from the cluster: every object labelled with the run, then the run's own
namespace, and waiting until the API has none of them left.

The final cleanup and ``testbed cleanup DIR`` both end here (through the backend's
``cleanup_leftovers``); a stack's objects, recorded in its journal, go first, before the
CRDs and the namespace they need. Secrets are never listed (a LIST of Secrets returns every
Secret's value, so the runner's Role does not grant it): the run's own are read and deleted
by name, those a run records as it applies them (:func:`record_secret`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from pathlib import Path

from testbed.backends.kubernetes.names import RUN, label_value, run_selector
from testbed.backends.kubernetes.stack_journal import GONE_TIMEOUT_S, remove_journalled
from testbed.clients.kube import Kube
from testbed.core.errors import ClusterConflict

#: Kinds a run's label selects, deleted in this order (pods go with their Deployments).
RUN_KINDS = ("Job", "Deployment", "Service", "ReplicaSet", "Pod", "ConfigMap")
SECRET_LINE = "Secret "  # noqa: S105 - a line of the objects marker: a Secret the run applies


def record_secret(marker: Path, name: str) -> None:
    """Note in the run's objects marker that Secret ``name`` is about to be applied."""
    with marker.open("a", encoding="utf-8") as out:
        out.write(f"{SECRET_LINE}{name}\n")


def recorded_secrets(marker: Path) -> set[str]:
    if not marker.is_file():
        return set()
    lines = marker.read_text(encoding="utf-8").splitlines()
    return {line.removeprefix(SECRET_LINE) for line in lines if line.startswith(SECRET_LINE)}


async def delete_run_objects(
    kube: Kube,
    run_id: str,
    run_dir: Path,
    namespace: str,
    whole_namespace: bool,
    datashim: bool,
    secrets: Collection[str] = (),
) -> list[str]:
    """Delete every object labelled with run ``run_id`` (a stack's journalled objects first),
    then the run's own namespace when it has one (``whole_namespace``), and wait until the
    API has none of them left; what was deleted, for the run's log."""
    # Stacks first: their custom objects go before the CRDs and the namespace they need.
    stacks = await remove_journalled(kube, run_id, run_dir)
    selector = run_selector(run_id)
    kinds = [*RUN_KINDS, *(["Dataset"] if datashim else [])]
    gone = await asyncio.to_thread(kube.delete_labelled, kinds, namespace, selector)
    mine = sorted(await asyncio.to_thread(_own_secrets, kube, run_id, namespace, secrets))
    for name in mine:
        if await asyncio.to_thread(kube.delete, "Secret", name, namespace):
            gone.append(f"Secret/{name} in {namespace}")
    if whole_namespace and await asyncio.to_thread(kube.delete, "Namespace", namespace):
        gone.append(f"Namespace/{namespace}")
    if gone:
        await _wait_gone(kube, kinds, selector, namespace, whole_namespace, run_id, run_dir, mine)
    return [f"deleted {name}" for name in [*stacks, *gone]]


async def _wait_gone(
    kube: Kube,
    kinds: list[str],
    selector: str,
    namespace: str,
    whole_namespace: bool,
    run_id: str,
    run_dir: Path,
    secrets: Collection[str],
) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + GONE_TIMEOUT_S
    while loop.time() < deadline:
        left = await asyncio.to_thread(_remaining, kube, kinds, namespace, selector)
        left += await asyncio.to_thread(_own_secrets, kube, run_id, namespace, secrets)
        if whole_namespace:
            ns = await asyncio.to_thread(kube.get, "Namespace", namespace)
            left += [f"Namespace/{namespace}"] if ns is not None else []
        if not left:
            return
        await asyncio.sleep(0.2)  # deletion has no watchable end across kinds; poll briefly
    raise ClusterConflict(
        f"objects of run {run_id} still exist {GONE_TIMEOUT_S:.0f} s after deletion;"
        f" remove them with `testbed cleanup {run_dir}`"
    )


def _remaining(kube: Kube, kinds: list[str], namespace: str, selector: str) -> list[str]:
    return [
        f"{kind}/{item['metadata']['name']}"
        for kind in kinds
        for item in kube.list_served(kind, namespace, selector)
    ]


def _own_secrets(kube: Kube, run_id: str, namespace: str, names: Collection[str]) -> list[str]:
    """Which Secrets of ``names`` exist labelled with this run (read one by one, by name)."""
    found = []
    for name in names:
        secret = kube.get("Secret", name, namespace)
        labels = ((secret or {}).get("metadata") or {}).get("labels") or {}
        if labels.get(RUN) == label_value(run_id):
            found.append(name)
    return found
