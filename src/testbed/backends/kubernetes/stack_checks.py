"""What a stack's ``ready``, ``endpoint`` and ``metrics`` name must exist in it (pure).

Checked against the rendered objects before a run directory exists, so a typo is exit 2 at
the campaign's line, not an ERROR after minutes of waiting. A readiness condition, a
Gateway endpoint and a ``url_from`` endpoint must name objects of the stack. A Service may
also be made by an operator of the stack (KServe's ``NAME-predictor``): it must be in the
stack only when the stack has no custom resource that could make it.
"""

from __future__ import annotations

from collections.abc import Sequence

from testbed.backends.kubernetes.stack_render import StackObject
from testbed.config.stacks import (
    GatewayEndpoint,
    MetricsTarget,
    ServiceEndpoint,
    StackDeployment,
    StackEndpoint,
    StatusEndpoint,
)

Problem = tuple[str, tuple[str | int, ...]]

#: API groups whose kinds make no Services of their own (workloads, config, RBAC …).
_PLAIN_GROUPS = frozenset(
    {"", "v1", "apps", "batch", "rbac.authorization.k8s.io", "policy", "autoscaling",
     "networking.k8s.io", "storage.k8s.io", "apiextensions.k8s.io", "scheduling.k8s.io"}
)  # fmt: skip


def group_of(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def _have(objects: Sequence[StackObject], kind: str, name: str) -> bool:
    return any(o.kind == kind and o.name == name for o in objects)


def _listing(objects: Sequence[StackObject], kind: str | None = None) -> str:
    named = [o.describe() for o in objects if kind is None or o.kind == kind]
    return ", ".join(named) or "none"


def _operator_made(objects: Sequence[StackObject]) -> bool:
    return any(group_of(o.api_version) not in _PLAIN_GROUPS for o in objects)


def reference_problems(
    deployment: StackDeployment, objects: Sequence[StackObject]
) -> list[Problem]:
    """Names in ``ready``/``endpoint``/``metrics`` that the stack cannot satisfy; each with
    its field path (relative to the deployment) and the fix."""
    found: list[Problem] = []
    for j, entry in enumerate(deployment.ready):
        if not _have(objects, entry.kind, entry.name):
            found.append(
                (
                    f"ready[{j}] waits for {entry.kind}/{entry.name}, which the stack does"
                    f" not have (its objects: {_listing(objects)}) — name one of them",
                    ("ready", j),
                )
            )
    endpoint = deployment.endpoint
    if isinstance(endpoint, GatewayEndpoint) and not _have(objects, "Gateway", endpoint.gateway):
        found.append(
            (
                f"endpoint names Gateway {endpoint.gateway}, which the stack does not have"
                f" (its Gateways: {_listing(objects, 'Gateway')})",
                ("endpoint", "gateway"),
            )
        )
    if isinstance(endpoint, StatusEndpoint) and not _have(objects, endpoint.kind, endpoint.name):
        found.append(
            (
                f"endpoint reads {endpoint.url_from} of {endpoint.kind}/{endpoint.name},"
                f" which the stack does not have (its objects: {_listing(objects)})",
                ("endpoint", "name"),
            )
        )
    services: list[tuple[str, StackEndpoint | MetricsTarget]] = [("endpoint", endpoint)]
    if deployment.metrics:
        services.append(("metrics", deployment.metrics))
    for field, target in services:
        name = target.service if isinstance(target, ServiceEndpoint | MetricsTarget) else None
        if name and not _have(objects, "Service", name) and not _operator_made(objects):
            found.append(
                (
                    f"{field} names Service {name}, which the stack does not have and nothing in"
                    f" it would make (its Services: {_listing(objects, 'Service')})",
                    (field, "service"),
                )
            )
    return found
