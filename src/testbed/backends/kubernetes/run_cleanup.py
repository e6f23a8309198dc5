"""Removing a run from the cluster: every object labelled with the run, then the run's own
namespace, and waiting until the API has none of them left.

The final cleanup and ``testbed cleanup DIR`` both end here (through the backend's
``cleanup_leftovers``); a stack's objects, recorded in its journal, go first, before the
CRDs and the namespace they need.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from testbed.backends.kubernetes.names import run_selector
from testbed.backends.kubernetes.stack_journal import GONE_TIMEOUT_S, remove_journalled
from testbed.clients.kube import Kube
from testbed.core.errors import ClusterConflict

#: Kinds a run's label selects, deleted in this order (pods go with their Deployments).
RUN_KINDS = ("Job", "Deployment", "Service", "ReplicaSet", "Pod", "Secret", "ConfigMap")


async def delete_run_objects(
    kube: Kube,
    run_id: str,
    run_dir: Path,
    namespace: str,
    whole_namespace: bool,
    datashim: bool,
) -> list[str]:
    """Delete every object labelled with run ``run_id`` (a stack's journalled objects first),
    then the run's own namespace when it has one (``whole_namespace``), and wait until the
    API has none of them left; what was deleted, for the run's log."""
    # Stacks first: their custom objects go before the CRDs and the namespace they need.
    stacks = await remove_journalled(kube, run_id, run_dir)
    selector = run_selector(run_id)
    kinds = [*RUN_KINDS, *(["Dataset"] if datashim else [])]
    gone = await asyncio.to_thread(kube.delete_labelled, kinds, namespace, selector)
    if whole_namespace and await asyncio.to_thread(kube.delete, "Namespace", namespace):
        gone.append(f"Namespace/{namespace}")
    if gone:
        await _wait_gone(kube, kinds, selector, namespace, whole_namespace, run_id, run_dir)
    return [f"deleted {name}" for name in [*stacks, *gone]]


async def _wait_gone(
    kube: Kube,
    kinds: list[str],
    selector: str,
    namespace: str,
    whole_namespace: bool,
    run_id: str,
    run_dir: Path,
) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + GONE_TIMEOUT_S
    while loop.time() < deadline:
        left = await asyncio.to_thread(_remaining, kube, kinds, namespace, selector)
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
