"""A minimal OpenAPI v3 index: enough for kubectl to hand validation to the server.

``kubectl create -f`` / ``apply -f`` check, per group-version, whether the PATCH operation
of the kind takes the ``fieldValidation`` query parameter; if it does they send
``fieldValidation=Strict`` and validate nothing themselves, otherwise they want full
schemas (which the emulator does not have). So each group-version document lists, for
every kind, one PATCH path carrying that parameter and nothing else: no schemas
(``kubectl explain`` does not work against the emulator).
"""

from __future__ import annotations

import hashlib
from typing import Any

from kubemu.storage.resources import Registry, ResourceType


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def index(registry: Registry) -> dict[str, Any]:
    paths = {}
    for group, versions in registry.group_versions().items():
        for version in versions:
            gv = _gv_path(group, version)
            digest = hashlib.sha256(
                repr(sorted(rt.plural for rt in registry.in_group_version(group, version))).encode()
            )
            paths[gv] = {
                "serverRelativeURL": f"/openapi/v3/{gv}?hash={digest.hexdigest()[:32].upper()}"
            }
    return {"paths": paths}


def _patch_path(rt: ResourceType) -> tuple[str, dict[str, Any]]:
    scope = "/namespaces/{namespace}" if rt.namespaced else ""
    path = f"/{_gv_path(rt.group, rt.version)}{scope}/{rt.plural}/{{name}}"
    operation = {
        "operationId": f"patch{rt.kind}",
        "x-kubernetes-group-version-kind": {
            "group": rt.group,
            "version": rt.version,
            "kind": rt.kind,
        },
        "x-kubernetes-action": "patch",
        "parameters": [
            {"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
            for name in ("dryRun", "fieldManager", "fieldValidation", "force")
        ],
        "responses": {"200": {"description": "OK"}},
    }
    return path, {"patch": operation}


def group_version(registry: Registry, gv: str) -> dict[str, Any] | None:
    """The document of ``api/v1`` or ``apis/<group>/<version>``, or None."""
    parts = gv.strip("/").split("/")
    if parts[0] == "api" and len(parts) == 2:
        group, version = "", parts[1]
    elif parts[0] == "apis" and len(parts) == 3:
        group, version = parts[1], parts[2]
    else:
        return None
    types = registry.in_group_version(group, version)
    if not types:
        return None
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (testbed emulator)", "version": "v1.32.0"},
        "paths": dict(_patch_path(rt) for rt in types),
        "components": {"schemas": {}},
    }
