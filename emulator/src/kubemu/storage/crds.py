"""CustomResourceDefinitions: a created CRD makes its group/version/plural served.

Creating ``apiextensions.k8s.io/v1`` CRD registers one :class:`ResourceType` per served
version (discovery lists them, custom objects get CRUD, watch, ``/status`` when declared,
and Table columns from ``additionalPrinterColumns``); its status says ``Established`` at
once. Deleting the CRD deletes its custom objects and stops serving the type. Schemas are
stored, not enforced (no structural-schema validation, pruning or conversion webhooks).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from kubemu.storage import meta as _meta
from kubemu.storage.resources import BUILTIN_GROUPS, Registry, ResourceType
from kubemu.storage.watchers import Event

KEY = "customresourcedefinitions.apiextensions.k8s.io"
Errors = list[tuple[str, str]]


def prepare(crd: dict[str, Any]) -> Errors:
    """Validate a new CRD and give it the status the server would once it is established."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group, plural, kind = spec.get("group"), names.get("plural"), names.get("kind")
    errors: Errors = []
    if not group:
        errors.append(("spec.group", "Required value"))
    elif group in BUILTIN_GROUPS or group == "":
        errors.append(("spec.group", f'Invalid value: "{group}": is a built-in group'))
    if not plural:
        errors.append(("spec.names.plural", "Required value"))
    if not kind:
        errors.append(("spec.names.kind", "Required value"))
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        errors.append(
            ("spec.scope", 'Unsupported value: supported values: "Cluster", "Namespaced"')
        )
    versions = spec.get("versions") or []
    if not versions:
        errors.append(("spec.versions", "Required value"))
    if sum(1 for v in versions if v.get("storage")) != 1:
        errors.append(
            (
                "spec.versions",
                "Invalid value: must have exactly one version marked as storage version",
            )
        )
    if plural and group and crd["metadata"]["name"] != f"{plural}.{group}":
        errors.append(
            (
                "metadata.name",
                f'Invalid value: "{crd["metadata"]["name"]}":'
                ' must be spec.names.plural+"."+spec.group',
            )
        )
    if errors or not kind:
        return errors
    names.setdefault("singular", str(kind).lower())
    names.setdefault("listKind", f"{kind}List")
    stamp = _meta.now()
    crd["status"] = {
        "acceptedNames": dict(names),
        "storedVersions": [v["name"] for v in versions if v.get("storage")],
        "conditions": [
            {"type": t, "status": "True", "reason": r, "message": m, "lastTransitionTime": stamp}
            for t, r, m in (
                ("NamesAccepted", "NoConflicts", "no conflicts found"),
                ("Established", "InitialNamesAccepted", "the initial names have been accepted"),
            )
        ],
    }
    return []


def types_of(crd: dict[str, Any]) -> list[ResourceType]:
    """One served type per served version, the storage version first."""
    spec = crd["spec"]
    names = spec["names"]
    versions = sorted(spec["versions"], key=lambda v: not v.get("storage"))
    out = []
    for version in versions:
        if not version.get("served", True):
            continue
        subresources = version.get("subresources") or {}
        out.append(
            ResourceType(
                spec["group"],
                version["name"],
                names["kind"],
                names["plural"],
                spec["scope"] == "Namespaced",
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                subresources=tuple(s for s in ("status", "scale") if s in subresources),
                scale_paths=_scale_paths(subresources.get("scale")),
                printer_columns=tuple(
                    (c["name"], c.get("type", "string"), c["jsonPath"])
                    for c in version.get("additionalPrinterColumns") or []
                    if c.get("name") and c.get("jsonPath")
                ),
            )
        )
    return out


def _scale_paths(scale: dict[str, Any] | None) -> tuple[str, str, str]:
    scale = scale or {}
    return (
        scale.get("specReplicasPath", ".spec.replicas"),
        scale.get("statusReplicasPath", ".status.replicas"),
        scale.get("labelSelectorPath") or ".status.selector",
    )


class Served(Protocol):
    """What keeps the served types: the store (:class:`.store.Store`) that holds the CRDs."""

    registry: Registry

    def add_bucket(self, rt: ResourceType) -> None: ...

    def drop_bucket(self, key: str) -> None: ...

    def subscribe(self, key: str, callback: Callable[[Event], None]) -> None: ...


def follow(store: Served) -> None:
    """Keep the store's registry in step with the CRDs it holds."""

    def changed(event: Event) -> None:
        crd = event.object
        spec = crd.get("spec") or {}
        group, plural = spec.get("group", ""), (spec.get("names") or {}).get("plural", "")
        store.registry.remove_group_plural(group, plural)
        if event.type == "DELETED":
            store.drop_bucket(f"{plural}.{group}")
            return
        served = types_of(crd)
        for rt in served:
            store.registry.add(rt)
        if served:
            store.add_bucket(served[0])

    store.subscribe(KEY, changed)
