"""How fast the emulator's control plane places and starts pods: N GPU nodes × M pods.

Creates the nodes and pods straight in the store (no HTTP), runs the scheduler and the
process-kubelet (an unknown image: no process, KWOK-like stages) and prints how long it takes
until every pod is bound and until every pod is Running and Ready (read from a watch, as a
client would), then fills the cluster and shows the message of the one pod that does not fit.

    PYTHONPATH=src python bench/emulator_control_plane.py --nodes 1000 --pods 1000
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from kubemu import ClusterShape, ControlPlane, PlaneSettings, Store
from kubemu.apiserver.nodes import node_manifest


def gpu_pod(index: int) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": "1"}
    container = {"name": "c", "image": "fake:1", "resources": {"limits": limits}}
    return {"metadata": {"name": f"w-{index}"}, "spec": {"containers": [container]}}


def ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


async def until(store: Store, wanted: int, test: Any) -> float:
    """perf_counter() when ``wanted`` pods pass ``test``, seen through a watch."""
    passing: set[str] = set()
    watch = store.watch("pods", "default")
    try:
        async for event in watch:
            name = event.object["metadata"]["name"]
            if test(event.object):
                passing.add(name)
            else:
                passing.discard(name)
            if len(passing) >= wanted:
                return time.perf_counter()
    finally:
        watch.close()
    raise RuntimeError("the watch ended")


async def main(nodes: int, pods: int, gpus: int) -> None:
    store = Store()
    shape = ClusterShape(nodes=nodes, gpus_per_node=gpus)
    for index in range(nodes):
        store.create("nodes", node_manifest(shape, index))
    with tempfile.TemporaryDirectory() as state:
        plane = ControlPlane(store, PlaneSettings(state_dir=Path(state)))
        task = asyncio.create_task(plane.run())
        await asyncio.sleep(0.1)
        bound = asyncio.create_task(until(store, pods, lambda p: p["spec"].get("nodeName")))
        running = asyncio.create_task(until(store, pods, ready))
        await asyncio.sleep(0)
        started = time.perf_counter()
        for index in range(pods):
            store.create("pods", gpu_pod(index), "default")
        created = time.perf_counter()
        bound_at, ready_at = await bound, await running
        print(f"{nodes} nodes × {gpus} GPUs, {pods} one-GPU pods")
        print(f"  create {pods} pods in the store: {(created - started) * 1e3:8.1f} ms")
        print(f"  all bound:                       {(bound_at - started) * 1e3:8.1f} ms")
        print(f"  all Running and Ready:           {(ready_at - started) * 1e3:8.1f} ms")
        extra = nodes * gpus - pods + 1
        if 0 < extra <= 20000:
            t0 = time.perf_counter()
            full = asyncio.create_task(
                until(store, nodes * gpus, lambda p: p["spec"].get("nodeName"))
            )
            await asyncio.sleep(0)
            for index in range(pods, pods + extra):
                store.create("pods", gpu_pod(index), "default")
            filled = await full
            print(f"  fill the cluster (+{extra} pods):   {(filled - t0) * 1e3:8.1f} ms")
            await asyncio.sleep(0.2)
            last = store.get("pods", "default", f"w-{pods + extra - 1}")
            conditions = (last.get("status") or {}).get("conditions") or []
            told = [c["message"] for c in conditions if c["type"] == "PodScheduled"]
            print(f"  the one that does not fit: {told[0] if told else 'NOT MARKED'}")
        await plane.shutdown(1.0)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--gpus-per-node", type=int, default=1)
    args = parser.parse_args()
    asyncio.run(main(args.nodes, args.pods, args.gpus_per_node))
