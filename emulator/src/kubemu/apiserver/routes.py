"""URL paths of the Kubernetes REST API, parsed into what they address.

``/api/v1/namespaces/ns/pods/name/status`` → pods, ns, name, status. The one ambiguity of
the API — ``/api/v1/namespaces/<x>/<y>`` is a namespaced collection when ``<y>`` is a
namespaced resource, else subresource ``<y>`` of namespace ``<x>`` — is resolved the way the
real server resolves it. The legacy ``/watch/`` prefix is accepted.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubemu.storage.resources import Registry, ResourceType


@dataclass(frozen=True, slots=True)
class Target:
    """What a resource URL addresses."""

    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None
    watch_prefix: bool = False


def parse(registry: Registry, path: str) -> Target | None:
    """The target of a resource path, or None when nothing is served there."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    watch_prefix = bool(rest) and rest[0] == "watch"
    if watch_prefix:
        rest = rest[1:]
    if not rest:
        return None
    if rest[0] == "namespaces" and len(rest) >= 3:
        rt = registry.lookup(group, version, rest[2])
        if rt is not None and rt.namespaced:
            return _target(rt, rest[1], rest[3:], watch_prefix)
    rt = registry.lookup(group, version, rest[0])
    if rt is None or (rt.namespaced and len(rest) > 1):
        return None
    return _target(rt, None, rest[1:], watch_prefix)


def _target(
    rt: ResourceType, namespace: str | None, rest: list[str], watch_prefix: bool
) -> Target | None:
    if len(rest) > 2:
        return None
    name = rest[0] if rest else None
    sub = rest[1] if len(rest) == 2 else None
    if sub is not None and sub not in rt.subresources:
        return None
    return Target(rt, namespace, name, sub, watch_prefix)
