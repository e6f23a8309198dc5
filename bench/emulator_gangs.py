"""How fast the emulator's scheduler places gangs, and what preemption costs.

Creates N GPU nodes (8 GPUs each) and G PodGroups of W one-GPU workers straight in the store
(no HTTP), with more gangs than fit (the cluster holds ``nodes * 8 / W`` at once); runs the
scheduler alone (no kubelet: bound pods stay bound) and prints how long until every gang that
fits is bound, checking at every resourceVersion of a pod watch that no gang is partly bound.
Then a higher-priority gang of the same size arrives and preempts a lower one whole: how long
until it is bound.

    PYTHONPATH=src python bench/emulator_gangs.py --nodes 125 --gangs 400 --workers 4
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import defaultdict
from typing import Any

from kubemu import ClusterShape, Store
from kubemu.apiserver.nodes import node_manifest
from kubemu.scheduler.scheduler import Scheduler

LABEL = "scheduling.x-k8s.io/pod-group"
KEY = "podgroups.scheduling.x-k8s.io"


def worker(gang: str, index: int, priority_class: str = "") -> dict[str, Any]:
    container = {"name": "c", "image": "fake:1", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    spec: dict[str, Any] = {"containers": [container]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"metadata": {"name": f"{gang}-{index}", "labels": {LABEL: gang}}, "spec": spec}


async def bound_gangs(store: Store, wanted: int, partial: list[str]) -> float:
    """perf_counter() once ``wanted`` gangs are wholly bound; gangs partly bound at any
    version are appended to ``partial``."""
    state: dict[str, tuple[str, bool]] = {}
    last = None
    watch = store.watch("pods", "default")
    try:
        async for event in watch:
            if last is not None and event.rv != last:
                groups: dict[str, set[bool]] = defaultdict(set)
                for group, bound in state.values():
                    groups[group].add(bound)
                partial += [g for g, seen in groups.items() if len(seen) > 1]
                if sum(seen == {True} for seen in groups.values()) >= wanted:
                    return time.perf_counter()
            last = event.rv
            meta = event.object["metadata"]
            if event.type == "DELETED":
                state.pop(meta["name"], None)
            else:
                bound = bool(event.object["spec"].get("nodeName"))
                state[meta["name"]] = (meta["labels"][LABEL], bound)
    finally:
        watch.close()
    return time.perf_counter()


async def main(nodes: int, gangs: int, workers: int) -> None:
    store = Store()
    shape = ClusterShape(nodes=nodes, gpus_per_node=8)
    for index in range(nodes):
        store.create("nodes", node_manifest(shape, index))
    store.create("priorityclasses.scheduling.k8s.io", {"metadata": {"name": "low"}, "value": 1})
    store.create("priorityclasses.scheduling.k8s.io", {"metadata": {"name": "high"}, "value": 9})
    scheduler = Scheduler(store)
    task = asyncio.create_task(scheduler.run())
    fit = min(gangs, nodes * 8 // workers)
    partial: list[str] = []
    waiter = asyncio.create_task(bound_gangs(store, fit, partial))
    await asyncio.sleep(0)
    started = time.perf_counter()
    for g in range(gangs):
        store.create(
            KEY, {"metadata": {"name": f"g{g}"}, "spec": {"minMember": workers}}, "default"
        )
        for w in range(workers):
            store.create("pods", worker(f"g{g}", w, "low"), "default")
    created = time.perf_counter()
    async with asyncio.timeout(120):
        done = await waiter
    pods = gangs * workers
    print(f"{nodes} nodes × 8 GPUs, {gangs} gangs × {workers} workers ({pods} pods), {fit} fit")
    print(f"  created in {created - started:.2f} s;", end=" ")
    print(f"every fitting gang bound after {done - started:.2f} s")
    print(f"  partly bound gangs seen at any version: {len(partial)}")
    store.create(KEY, {"metadata": {"name": "vip"}, "spec": {"minMember": workers}}, "default")
    started = time.perf_counter()
    for w in range(workers):
        store.create("pods", worker("vip", w, "high"), "default")
    for _ in range(20000):
        vip = [store.get("pods", "default", f"vip-{w}") for w in range(workers)]
        if all(p["spec"].get("nodeName") for p in vip):
            break
        await asyncio.sleep(0.001)
    print(
        f"  a higher-priority gang preempted its way in after {time.perf_counter() - started:.3f} s"
    )
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=125)
    parser.add_argument("--gangs", type=int, default=400)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    asyncio.run(main(args.nodes, args.gangs, args.workers))
