"""Discovery documents: ``/version``, ``/api``, ``/api/v1``, ``/apis``, ``/apis/<g>[/<v>]``.

kubectl learns every resource name, short name, category (``get all``), verb and scope from
these; the official client needs none of them. Only the legacy (unaggregated) form is
served: kubectl asks for aggregated discovery first and falls back to this when the answer
is plain ``application/json``.
"""

from __future__ import annotations

import platform
from typing import Any

from kubemu.storage.resources import VERBS, Registry, ResourceType

#: The Kubernetes version the emulator answers as (kubectl 1.32 on this machine).
KUBE_VERSION = (1, 32, 0)


def version() -> dict[str, Any]:
    major, minor, patch = KUBE_VERSION
    return {
        "major": str(major),
        "minor": str(minor),
        "gitVersion": f"v{major}.{minor}.{patch}-testbed-emulator",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.23 (emulated by Python " + platform.python_version() + ")",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _group(group: str, versions: list[str]) -> dict[str, Any]:
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": entries, "preferredVersion": entries[0]}


def api_groups(registry: Registry) -> dict[str, Any]:
    groups = [_group(g, vs) for g, vs in registry.group_versions().items() if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(registry: Registry, group: str) -> dict[str, Any] | None:
    versions = registry.group_versions().get(group)
    if not versions or not group:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(group, versions)}


def _resource(rt: ResourceType) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": rt.plural,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": list(VERBS),
    }
    if rt.short_names:
        entry["shortNames"] = list(rt.short_names)
    if rt.categories:
        entry["categories"] = list(rt.categories)
    return entry


_SUBRESOURCE_VERBS = {
    "status": ["get", "patch", "update"],
    "scale": ["get", "patch", "update"],
    "log": ["get"],
    "portforward": ["create", "get"],
    "exec": ["create", "get"],
    "binding": ["create"],
    "eviction": ["create"],
    "finalize": ["update"],
}


def resource_list(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    types = registry.in_group_version(group, version)
    if not types:
        return None
    resources: list[dict[str, Any]] = []
    for rt in types:
        resources.append(_resource(rt))
        for sub in rt.subresources:
            kind = "Scale" if sub == "scale" else rt.kind
            resources.append(
                {
                    "name": f"{rt.plural}/{sub}",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "kind": kind,
                    "verbs": _SUBRESOURCE_VERBS.get(sub, ["get"]),
                    **({"group": "autoscaling", "version": "v1"} if sub == "scale" else {}),
                }
            )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }
