"""testbed never deletes or overwrites what it did not create: a stack's journal and removal
against an API that holds, besides the worker's own objects, a CRD installed before the run,
another worker's object and another run's object under names the journal also lists.

The API here is a dictionary of objects by path (what the journal's code reads and deletes
through ``Kube.call``), so each test states exactly what exists before and asserts what is
left, and in which order the deletions came.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from testbed.backends.kubernetes.names import RUN, WORKER
from testbed.backends.kubernetes.stack import _Worker
from testbed.backends.kubernetes.stack_journal import (
    JOURNALS,
    Journal,
    delete_refs,
    object_path,
    reference,
    remove_journalled,
)
from testbed.backends.kubernetes.stack_render import StackObject
from testbed.clients.kube.rest import KindInfo
from testbed.core.errors import ClusterConflict, ClusterError, ServerStartError

RUN_ID, WORKER_ID = "run-1", "w-001"
CRD_INFO = KindInfo("apiextensions.k8s.io/v1", "customresourcedefinitions", namespaced=False)
WIDGET_INFO = KindInfo("example.com/v1", "widgets")
CM_INFO = KindInfo("v1", "configmaps")
KINDS = {"CustomResourceDefinition": CRD_INFO, "Widget": WIDGET_INFO, "ConfigMap": CM_INFO}


class Api:
    """Objects by path; GET, POST, PUT and DELETE as the API server answers them."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.writes: list[tuple[str, str]] = []  # (method, path) of every write

    def add(self, kind: str, name: str, labels: dict[str, str], ns: str | None = "ns") -> str:
        info = KINDS[kind]
        meta: dict[str, Any] = {"name": name, "labels": labels, "resourceVersion": "7"}
        if info.namespaced:
            meta["namespace"] = ns
        path = object_path(info, ns, name)
        self.objects[path] = {"apiVersion": info.api_version, "kind": kind, "metadata": meta}
        return path

    def call(self, method: str, path: str, doing: str, body: Any = None) -> dict[str, Any]:
        if method == "GET":
            if path not in self.objects:
                raise ClusterError(f"{doing}: not found", 404)
            return self.objects[path]
        self.writes.append((method, path))
        if method == "DELETE":
            self.objects.pop(path)  # no finalizers here: gone at once
            return {}
        named = f"{path}/{body['metadata']['name']}" if method == "POST" else path
        if method == "POST" and named in self.objects:
            raise ClusterConflict(f"{doing}: already exists", 409)
        self.objects[named] = body
        return dict(body)


def ours(worker: str = WORKER_ID, run: str = RUN_ID) -> dict[str, str]:
    return {RUN: run, WORKER: worker}


def ref(kind: str, name: str) -> dict[str, Any]:
    info = KINDS[kind]
    obj = {"kind": kind, "metadata": {"name": name, "namespace": "ns"}}
    return reference(info, obj)


def test_removal_deletes_only_this_workers_objects_newest_first(tmp_path: Path) -> None:
    api = Api()
    foreign = {
        api.add("CustomResourceDefinition", "widgets.example.com", {}, None),  # before the run
        api.add("ConfigMap", "sibling", ours(worker="w-002")),  # another worker of this run
        api.add("ConfigMap", "other-run", ours(run="run-0")),  # another run, same worker id
        api.add("ConfigMap", "unlabelled", {}),  # someone's, with a name the journal lists
    }
    mine = [api.add("Widget", "w", ours()), api.add("ConfigMap", "config", ours())]
    journal = Journal(tmp_path / JOURNALS / f"{WORKER_ID}.jsonl")
    for kind, name in [("CustomResourceDefinition", "widgets.example.com"), ("Widget", "w"),
                       ("ConfigMap", "sibling"), ("ConfigMap", "other-run"),
                       ("ConfigMap", "unlabelled"), ("ConfigMap", "config"),
                       ("ConfigMap", "never-made")]:  # fmt: skip
        journal.note(ref(kind, name))
    gone = asyncio.run(remove_journalled(api, RUN_ID, tmp_path))  # type: ignore[arg-type]
    assert gone == ["ConfigMap/config", "Widget/w"]  # newest first
    assert api.writes == [("DELETE", mine[1]), ("DELETE", mine[0])]
    assert set(api.objects) == foreign
    assert not journal.path.exists()


def test_custom_objects_go_before_the_crd_that_defines_them(tmp_path: Path) -> None:
    api = Api()
    crd = api.add("CustomResourceDefinition", "widgets.example.com", ours(), None)
    widget = api.add("Widget", "w", ours())
    refs = [reference(CRD_INFO, {"kind": "CustomResourceDefinition",
                                 "metadata": {"name": "widgets.example.com"}}),
            ref("Widget", "w")]  # fmt: skip
    gone = asyncio.run(delete_refs(api, RUN_ID, WORKER_ID, refs))  # type: ignore[arg-type]
    assert gone == ["Widget/w", "CustomResourceDefinition/widgets.example.com"]
    assert api.writes == [("DELETE", widget), ("DELETE", crd)]
    assert api.objects == {}


def _create(api: Api, kind: str, name: str, tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.jsonl")
    worker = _Worker(api, "ns", RUN_ID, WORKER_ID, journal)  # type: ignore[arg-type]
    labels = ours() if kind != "CustomResourceDefinition" else {}
    meta: dict[str, Any] = {"name": name, "labels": labels}
    obj = {"apiVersion": KINDS[kind].api_version, "kind": kind, "metadata": meta}
    asyncio.run(worker._create(StackObject(obj, "stack.yaml:1"), KINDS[kind]))
    assert [n["name"] for n in journal.refs()] == [name]


@pytest.mark.parametrize(
    ("labels", "owner"),
    [(ours(worker="w-002"), RUN_ID), (ours(run="run-0"), "run-0"), ({}, "someone else")],
)
def test_an_existing_object_of_anyone_else_is_refused_not_replaced(
    labels: dict[str, str], owner: str, tmp_path: Path
) -> None:
    api = Api()
    path = api.add("ConfigMap", "config", labels)
    before = json.dumps(api.objects[path])
    with pytest.raises(ServerStartError) as refused:
        _create(api, "ConfigMap", "config", tmp_path)
    assert f"ConfigMap/config already exists in ns and belongs to {owner}" in str(refused.value)
    assert json.dumps(api.objects[path]) == before
    assert ("PUT", path) not in api.writes


def test_a_crd_installed_before_the_run_is_used_as_it_is(tmp_path: Path) -> None:
    api = Api()
    path = api.add("CustomResourceDefinition", "widgets.example.com", {}, None)
    before = json.dumps(api.objects[path])
    _create(api, "CustomResourceDefinition", "widgets.example.com", tmp_path)
    assert json.dumps(api.objects[path]) == before
    assert api.writes == [("POST", CRD_INFO.collection(None))]  # refused, then left alone


def test_this_workers_own_leftover_is_replaced(tmp_path: Path) -> None:
    api = Api()
    path = api.add("ConfigMap", "config", ours())
    _create(api, "ConfigMap", "config", tmp_path)
    assert api.writes[-1] == ("PUT", path)
    assert api.objects[path]["metadata"]["resourceVersion"] == "7"  # the version it replaced
