"""What a stack worker does on a cluster, as RBAC needs: derived from the rendered stack.

For each namespaced object the stack renders, ``create`` (apply), ``get`` and ``delete``
(removal reads each object, deletes it and reads until it is gone); the kinds named in
``ready`` are also LISTed and WATCHed; the endpoint and metrics Services are read (``get``)
and their pods listed (``stack_reach``); a Gateway's fronting Service is found by a label
LIST. A Role the stack ships grants its rules to the stack's own ServiceAccount, and
kube-apiserver lets the runner write that Role (and bind it) only when the runner holds
every rule itself — so those rules are needed too. Cluster-scoped objects (CRDs, ClusterRoles
a chart needs) are not the runner's: they are the cluster admin's prerequisites
(:func:`admin_objects`), and the worker uses a CRD the cluster already serves as it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from testbed.backends.kubernetes.names import RUN, WORKER
from testbed.backends.kubernetes.stack import render_worker
from testbed.backends.kubernetes.stack_render import StackObject
from testbed.backends.kubernetes.stack_scope import CRD, is_cluster_scoped
from testbed.clients.kube.rest import KINDS
from testbed.config.backend_settings import KubernetesSettings
from testbed.config.stacks import GatewayEndpoint, ServiceEndpoint, StackDeployment, StatusEndpoint

Need = dict[tuple[str, str], set[str]]  # (API group, resource) → verbs
EXPORT_RUN = "export"


def rendered(
    deployments: list[StackDeployment], backend: KubernetesSettings, base: Path
) -> list[StackObject]:
    """Every object the campaign's stacks render (as a worker of run ``export`` would)."""
    return [
        item
        for deployment in deployments
        for item in render_worker(EXPORT_RUN, deployment.name, deployment, backend, base)
    ]


def stack_needs(
    deployments: list[StackDeployment], objects: list[StackObject]
) -> tuple[Need, list[dict[str, Any]]]:
    """The (group, resource) → verbs the stacks' workers use, and the rules of the Roles
    they ship (held by the runner so that it may write and bind them)."""
    plurals = _crd_plurals(objects)
    need: Need = {}

    def add(api_version: str, kind: str, *verbs: str) -> None:
        group = api_version.rpartition("/")[0]
        need.setdefault((group, plurals.get((group, kind)) or plural(kind)), set()).update(verbs)

    versions = {o.kind: o.api_version for o in objects}
    for item in objects:
        if not is_cluster_scoped(item, objects):
            add(item.api_version, item.kind, "create", "get", "delete")
    for deployment in deployments:
        for entry in deployment.ready:
            add(versions.get(entry.kind, "v1"), entry.kind, "list", "watch")
        if isinstance(deployment.endpoint, ServiceEndpoint) or deployment.metrics is not None:
            add("v1", "Service", "get")
            add("v1", "Pod", "list")  # the Service's ready pods, each port-forwarded
        if isinstance(deployment.endpoint, GatewayEndpoint):
            add(versions.get("Gateway", "gateway.networking.k8s.io/v1"), "Gateway", "get")
            add("v1", "Service", "get", "list")  # the Service fronting the Gateway
            add("v1", "Pod", "list")
        if isinstance(deployment.endpoint, StatusEndpoint):
            endpoint = deployment.endpoint
            add(versions.get(endpoint.kind, "v1"), endpoint.kind, "get")
            add("v1", "Service", "get")  # a SERVICE.NAMESPACE.svc host is that Service
            add("v1", "Pod", "list")
    granted = [
        rule for item in objects if item.kind == "Role" for rule in item.obj.get("rules") or []
    ]
    return need, granted


def admin_objects(objects: list[StackObject]) -> list[dict[str, Any]]:
    """The stacks' cluster-scoped objects, without testbed's run labels: a cluster admin
    applies them once (the worker then finds a served CRD and leaves it as it is)."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for item in objects:
        if not is_cluster_scoped(item, objects):
            continue
        obj = dict(item.obj)
        meta = dict(obj.get("metadata") or {})
        labels = {k: v for k, v in (meta.get("labels") or {}).items() if k not in (RUN, WORKER)}
        meta.pop("namespace", None)
        if labels:
            meta["labels"] = labels
        else:
            meta.pop("labels", None)
        found[(item.kind, item.name)] = {**obj, "metadata": meta}
    return list(found.values())


def plural(kind: str) -> str:
    """A kind's resource name as kubectl guesses it (UnsafeGuessKindToResource)."""
    known = KINDS.get(kind)
    if known is not None:
        return known.plural
    lower = kind.lower()
    if lower.endswith(("s", "x", "z", "ch", "sh")):
        return lower + "es"
    if lower.endswith("y") and lower[-2:-1] not in ("a", "e", "i", "o", "u"):
        return lower[:-1] + "ies"
    return lower + "s"


def _crd_plurals(objects: list[StackObject]) -> dict[tuple[str, str], str]:
    """(group, kind) → plural, for the kinds the stack's own CRDs define."""
    found = {}
    for o in objects:
        if o.kind == CRD:
            spec = o.obj.get("spec") or {}
            names = spec.get("names") or {}
            found[(str(spec.get("group")), str(names.get("kind")))] = str(names.get("plural"))
    return found
