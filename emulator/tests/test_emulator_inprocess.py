"""The Emulator in-process: start/stop with shutdown hooks, subresource handlers, bookmarks,
Table answers, discovery and the OpenAPI index, spoken to over HTTPS with aiohttp."""

from __future__ import annotations

import base64
import ssl
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from kubemu import ClusterShape, Emulator
from kubemu.apiserver import streaming

pytestmark = pytest.mark.kubernetes
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


class Client:
    def __init__(self, emulator: Emulator, session: aiohttp.ClientSession) -> None:
        self.url = emulator.url
        self.session = session

    async def json(
        self, method: str, path: str, body: Any = None, **headers: str
    ) -> tuple[int, Any]:
        data = orjson.dumps(body) if body is not None else None
        if data is not None:
            headers.setdefault("Content-Type", "application/json")
        async with self.session.request(
            method, self.url + path, data=data, headers=headers
        ) as resp:
            return resp.status, orjson.loads(await resp.read())


def _session(emulator: Emulator, token: str | None) -> aiohttp.ClientSession:
    config = emulator.kubeconfig()
    ca = base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]).decode()
    context = ssl.create_default_context(cadata=ca)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context), headers=headers)


async def _started(shape: ClusterShape) -> AsyncIterator[tuple[Emulator, Client]]:
    emulator = Emulator(shape)
    await emulator.start()
    session = _session(emulator, emulator.token)
    try:
        yield emulator, Client(emulator, session)
    finally:
        await session.close()
        await emulator.stop()


async def test_shutdown_hooks_run_last_added_first() -> None:
    emulator = Emulator(ClusterShape(nodes=1))
    order: list[str] = []

    async def first() -> None:
        order.append("first")

    async def second() -> None:
        order.append("second")

    emulator.on_shutdown(first)
    emulator.on_shutdown(second)
    await emulator.start()
    assert emulator.port > 0
    assert emulator.store.count("nodes") == 1
    await emulator.stop()
    assert order == ["second", "first"]


async def test_subresource_handler_and_auth() -> None:
    async def log(request: web.Request, namespace: str | None, name: str) -> web.StreamResponse:
        return web.Response(text=f"log of {namespace}/{name} tail={request.query.get('tailLines')}")

    async for emulator, client in _started(ClusterShape(nodes=1)):
        emulator.add_subresource("pods", "log", log)
        pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x:1"}]}}
        status, _ = await client.json("POST", "/api/v1/namespaces/default/pods", pod)
        assert status == 201
        async with client.session.get(
            client.url + "/api/v1/namespaces/default/pods/p/log?tailLines=5"
        ) as resp:
            assert await resp.text() == "log of default/p tail=5"
        anonymous = _session(emulator, None)
        async with (
            anonymous,
            anonymous.get(client.url + "/api/v1/namespaces/default/pods/p/log") as resp,
        ):
            assert resp.status == 401


async def test_idle_watch_carries_bookmarks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(streaming, "IDLE_TICK_S", 0.1)
    async for emulator, client in _started(ClusterShape(nodes=1)):
        current = str(emulator.store.resource_version)
        query = f"?watch=1&allowWatchBookmarks=true&resourceVersion={current}&timeoutSeconds=1"
        async with client.session.get(
            client.url + "/api/v1/namespaces/default/pods" + query
        ) as resp:
            lines = [orjson.loads(line) for line in (await resp.read()).splitlines()]
        assert lines
        assert {line["type"] for line in lines} == {"BOOKMARK"}
        assert lines[0]["object"]["metadata"]["resourceVersion"] == current


async def test_tables_discovery_and_openapi() -> None:
    async for _, client in _started(ClusterShape(nodes=2, gpus_per_node=0)):
        status, table = await client.json("GET", "/api/v1/nodes", Accept=TABLE)
        assert status == 200
        assert table["kind"] == "Table"
        assert [c["name"] for c in table["columnDefinitions"]][:5] == [
            "Name",
            "Status",
            "Roles",
            "Age",
            "Version",
        ]
        assert [row["cells"][:2] for row in table["rows"]] == [
            ["emu-node-0", "Ready"],
            ["emu-node-1", "Ready"],
        ]
        assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
        _, groups = await client.json("GET", "/apis")
        assert {"apps", "batch", "events.k8s.io", "apiextensions.k8s.io"} <= {
            g["name"] for g in groups["groups"]
        }
        _, core = await client.json("GET", "/api/v1")
        pods = next(r for r in core["resources"] if r["name"] == "pods")
        assert pods["categories"] == ["all"]
        assert pods["shortNames"] == ["po"]
        assert "pods/status" in {r["name"] for r in core["resources"]}
        _, index = await client.json("GET", "/openapi/v3")
        url = index["paths"]["apis/apps/v1"]["serverRelativeURL"]
        _, doc = await client.json("GET", url)
        patch = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]
        assert patch["x-kubernetes-group-version-kind"]["kind"] == "Deployment"
        assert "fieldValidation" in {p["name"] for p in patch["parameters"]}
        status, missing = await client.json("GET", "/apis/nope.example.com/v1")
        assert (status, missing["reason"]) == (404, "NotFound")
