"""The typed helpers and the watch stream against a Kubernetes API (the emulator, or
$KUBECONFIG's cluster): create, apply, list by label, patch, delete by label, logs of a
missing pod, and watch events in order from a resourceVersion."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed.clients.kube import Changes, ConnectionSpec, Kube, connect
from testbed.core.errors import ClusterConflict, ClusterError, ClusterNotFound

pytestmark = [pytest.mark.kubernetes, pytest.mark.cluster]


@pytest.fixture(scope="module")
def kubeconfig(request: pytest.FixtureRequest) -> Path:
    real = os.environ.get("KUBECONFIG")
    return Path(real) if real else Path(request.getfixturevalue("cluster_kubeconfig"))


@pytest.fixture
def kube(kubeconfig: Path) -> Iterator[Kube]:
    api = connect(ConnectionSpec(kubeconfig=str(kubeconfig)))
    kube = Kube(api)
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tb-rest-test"}}
    kube.apply(namespace)
    yield kube
    kube.delete("Namespace", "tb-rest-test")
    api.close()


def config_map(name: str, value: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "tb-rest-test", "labels": labels},
        "data": {"v": value},
    }


def test_create_apply_list_patch_delete(kube: Kube) -> None:
    kube.create(config_map("a", "1", run="r1"))
    with pytest.raises(ClusterConflict):
        kube.create(config_map("a", "1", run="r1"))
    assert kube.apply(config_map("a", "2", run="r1"))["data"] == {"v": "2"}  # replaced
    kube.create(config_map("b", "1", run="r2"))
    items, version = kube.list_objects("ConfigMap", "tb-rest-test", "run=r1")
    assert [i["metadata"]["name"] for i in items] == ["a"]
    assert version
    patched = kube.patch("ConfigMap", "a", "tb-rest-test", {"data": {"w": "3"}})
    assert patched["data"] == {"v": "2", "w": "3"}
    assert kube.delete_labelled(["ConfigMap"], "tb-rest-test", "run=r1") == [
        "ConfigMap/a in tb-rest-test"
    ]
    assert kube.get("ConfigMap", "a", "tb-rest-test") is None
    assert kube.delete("ConfigMap", "a", "tb-rest-test") is False
    assert kube.pod_log("nope", "tb-rest-test") == ""
    with pytest.raises(ClusterNotFound):
        kube.call("GET", "/api/v1/namespaces/tb-rest-test/configmaps/a", "get a")


async def test_changes_list_then_watch_in_order(kube: Kube) -> None:
    kube.create(config_map("w0", "0", run="watch"))
    changes = Changes(kube, "ConfigMap", "tb-rest-test", "run=watch")
    try:
        first = await changes.next(10)
        assert first is not None
        assert (first[0], first[1]["metadata"]["name"]) == ("ADDED", "w0")  # from the list
        await asyncio.to_thread(kube.create, config_map("w1", "1", run="watch"))
        await asyncio.to_thread(kube.patch, "ConfigMap", "w1", "tb-rest-test", {"data": {"v": "9"}})
        await asyncio.to_thread(kube.delete, "ConfigMap", "w0", "tb-rest-test")
        seen = []
        while len(seen) < 3:
            event = await changes.next(10)
            assert event is not None, f"only {seen}"
            seen.append((event[0], event[1]["metadata"]["name"]))
        assert seen == [("ADDED", "w1"), ("MODIFIED", "w1"), ("DELETED", "w0")]
    finally:
        changes.close()


async def test_closing_changes_ends_the_stream_for_every_caller(kube: Kube) -> None:
    changes = Changes(kube, "ConfigMap", "tb-rest-test", "run=nothing")
    seen: list[tuple[str, dict[str, Any]]] = []

    async def consume() -> None:
        async for event in changes:
            seen.append(event)

    task = asyncio.ensure_future(consume())
    assert await changes.next(0.5) is None  # nothing matches: the wait simply times out
    changes.close()
    async with asyncio.timeout(5):  # the async for ends; it does not wait for a watch timeout
        await task
    assert seen == []
    with pytest.raises(ClusterError, match="closed"):
        await changes.next(1)
