"""``backend.cluster_objects: admin`` (an exported campaign): a stack worker POSTs none of the
stack's cluster-scoped objects — the cluster admin applied them from the export's
``admin.yaml`` — and a CRD the admin did not install is an ERROR that names ``admin.yaml``
before anything is written. The API is tests/backends/kubernetes/test_stack_journal.py's
dictionary of objects, with discovery."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from testbed.backends.kubernetes.stack import _Worker
from testbed.backends.kubernetes.stack_journal import Journal
from testbed.backends.kubernetes.stack_render import StackObject
from testbed.clients.kube.rest import KindInfo
from testbed.core.errors import InputError, ServerStartError
from tests.backends.kubernetes.test_stack_journal import CM_INFO, CRD_INFO, RUN_ID, WORKER_ID, Api

RBAC = "rbac.authorization.k8s.io/v1"
SERVED = {
    ("v1", "ConfigMap"): CM_INFO,
    (RBAC, "ClusterRole"): KindInfo(RBAC, "clusterroles", namespaced=False),
    ("scheduling.k8s.io/v1", "PriorityClass"): KindInfo(
        "scheduling.k8s.io/v1", "priorityclasses", namespaced=False
    ),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): CRD_INFO,
}
WIDGETS = KindInfo("example.com/v1", "widgets", namespaced=False)


class Discovering(Api):
    def __init__(self, served: dict[tuple[str, str], KindInfo]) -> None:
        super().__init__()
        self.served = served

    def info(self, api_version: str, kind: str, *, fresh: bool = False) -> KindInfo:
        if (api_version, kind) not in self.served:
            raise InputError(f"the cluster does not serve {kind} in {api_version}")
        return self.served[(api_version, kind)]


def _obj(api_version: str, kind: str, name: str, **extra: Any) -> StackObject:
    return StackObject(
        {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}, **extra},
        "stack.yaml:1",
    )


CRD = _obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "widgets.example.com",
           spec={"group": "example.com", "scope": "Cluster", "names": {"kind": "Widget",
                 "plural": "widgets"}, "versions": [{"name": "v1", "served": True}]})  # fmt: skip
STACK = [
    CRD,
    _obj("example.com/v1", "Widget", "w"),  # cluster-scoped by the stack's own CRD
    _obj(RBAC, "ClusterRole", "reader", rules=[]),
    _obj("scheduling.k8s.io/v1", "PriorityClass", "high", value=1000),
    _obj("v1", "ConfigMap", "config"),
]


def _worker(api: Api, tmp_path: Path, admin_owned: bool) -> _Worker:
    journal = Journal(tmp_path / "journal.jsonl")
    return _Worker(api, "ns", RUN_ID, WORKER_ID, journal, admin_owned)  # type: ignore[arg-type]


def test_the_admins_objects_are_left_to_the_admin(tmp_path: Path) -> None:
    api = Discovering({**SERVED, ("example.com/v1", "Widget"): WIDGETS})  # admin.yaml applied
    placed = asyncio.run(_worker(api, tmp_path, admin_owned=True).apply(STACK))
    assert [item.describe() for item, _ in placed] == ["ConfigMap/config"]
    assert api.writes == [("POST", "/api/v1/namespaces/ns/configmaps")]


def test_a_run_of_its_own_creates_them_as_before(tmp_path: Path) -> None:
    api = Discovering({**SERVED, ("example.com/v1", "Widget"): WIDGETS})
    placed = asyncio.run(_worker(api, tmp_path, admin_owned=False).apply(STACK[2:]))
    assert [item.describe() for item, _ in placed] == [
        "ClusterRole/reader", "PriorityClass/high", "ConfigMap/config",
    ]  # fmt: skip


def test_a_crd_the_admin_did_not_install_names_admin_yaml(tmp_path: Path) -> None:
    api = Discovering(SERVED)  # Widget not served: admin.yaml was not applied
    with pytest.raises(ServerStartError) as refused:
        asyncio.run(_worker(api, tmp_path, admin_owned=True).apply(STACK))
    assert "CustomResourceDefinition/widgets.example.com is not installed" in str(refused.value)
    assert "admin.yaml" in str(refused.value)
    assert api.writes == []
