"""A container's environment as the kubelet builds it, then moved onto this host.

``env`` values, ``valueFrom`` (secretKeyRef, configMapKeyRef, fieldRef, resourceFieldRef)
and ``envFrom`` are resolved against the API objects, ``$(VAR)`` references expanded in env,
command and args (``$$`` escapes), as the kubelet does. Then the container is moved onto
the host: every container port becomes a free 127.0.0.1 port and every ``mountPath`` a host
directory, rewritten wherever they appear in args and env values; ``0.0.0.0`` becomes
``127.0.0.1`` so nothing the emulator starts listens beyond loopback.

A missing Secret, ConfigMap or key raises :class:`ConfigError`, which the kubelet reports
as the ``CreateContainerConfigError`` waiting reason with the real kubelet's message.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kubefacts.quantity import amount

#: ``lookup(kind, namespace, name)``: the object, or None when it does not exist.
Lookup = Callable[[str, str, str], Mapping[str, Any] | None]

_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
_FIELD_INDEX = re.compile(r"^metadata\.(labels|annotations)\['(.+)'\]$")


class ConfigError(Exception):
    """The container's configuration references something that does not exist."""


def resolve_env(
    container: Mapping[str, Any],
    pod: Mapping[str, Any],
    lookup: Lookup,
    services: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """``envFrom`` then ``env`` (later entries win), every value resolved and expanded;
    then the ``services`` variables the container does not set itself (as the kubelet
    does, ``$(VAR)`` in env values sees them too)."""
    namespace = str((pod.get("metadata") or {}).get("namespace") or "default")
    services = services or {}
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        prefix = str(source.get("prefix") or "")
        for key, value in _env_from(source, namespace, lookup).items():
            env[prefix + key] = value
    for entry in container.get("env") or []:
        name = str(entry["name"])
        if "valueFrom" in entry:
            found = _value_from(entry["valueFrom"], container, pod, namespace, lookup)
            if found is not None:
                env[name] = found
        else:
            env[name] = expand(str(entry.get("value") or ""), {**services, **env})
    return {**services, **env}


def expand(text: str, env: Mapping[str, str]) -> str:
    """``$(VAR)`` → its value when defined (kept verbatim otherwise); ``$$`` → ``$``."""

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return env.get(match.group(1), match.group(0))

    return _REFERENCE.sub(one, text)


def relocate(text: str, ports: Mapping[int, int], mounts: Sequence[tuple[str, str]]) -> str:
    """Move one arg or env value onto the host (see the module docstring)."""
    if text == "0.0.0.0":
        return "127.0.0.1"
    for inside, host in mounts:  # longest mount path first
        if text == inside or text.startswith(inside.rstrip("/") + "/"):
            text = host + text[len(inside.rstrip("/")) :]
            break
        text = text.replace("=" + inside.rstrip("/") + "/", "=" + host + "/")
        if text.endswith("=" + inside):
            text = text[: -len(inside)] + host
    for inside_port, host_port in ports.items():
        if text == str(inside_port):
            return str(host_port)
        text = re.sub(rf"(?<=[:=]){inside_port}\b", str(host_port), text)
    return text.replace("0.0.0.0", "127.0.0.1")


def _env_from(source: Mapping[str, Any], namespace: str, lookup: Lookup) -> dict[str, str]:
    for field, kind in (("configMapRef", "ConfigMap"), ("secretRef", "Secret")):
        ref = source.get(field)
        if ref is None:
            continue
        obj = lookup(kind, namespace, str(ref.get("name")))
        if obj is None:
            if ref.get("optional"):
                return {}
            raise ConfigError(f'{kind.lower()} "{ref.get("name")}" not found')
        return _data(obj, kind)
    return {}


def _data(obj: Mapping[str, Any], kind: str) -> dict[str, str]:
    if kind == "Secret":
        decoded = {k: base64.b64decode(v).decode() for k, v in (obj.get("data") or {}).items()}
        return {**decoded, **{k: str(v) for k, v in (obj.get("stringData") or {}).items()}}
    return {k: str(v) for k, v in (obj.get("data") or {}).items()}


def _value_from(
    source: Mapping[str, Any],
    container: Mapping[str, Any],
    pod: Mapping[str, Any],
    namespace: str,
    lookup: Lookup,
) -> str | None:
    for field, kind in (("secretKeyRef", "Secret"), ("configMapKeyRef", "ConfigMap")):
        ref = source.get(field)
        if ref is None:
            continue
        name, key = str(ref.get("name")), str(ref.get("key"))
        obj = lookup(kind, namespace, name)
        if obj is None:
            if ref.get("optional"):
                return None
            raise ConfigError(f'{kind.lower()} "{name}" not found')
        data = _data(obj, kind)
        if key not in data:
            if ref.get("optional"):
                return None
            raise ConfigError(f"couldn't find key {key} in {kind} {namespace}/{name}")
        return data[key]
    if "fieldRef" in source:
        return _field(pod, str(source["fieldRef"].get("fieldPath")))
    if "resourceFieldRef" in source:
        return _resource(container, source["resourceFieldRef"])
    return None


def _field(pod: Mapping[str, Any], path: str) -> str:
    meta, spec, status = (pod.get(k) or {} for k in ("metadata", "spec", "status"))
    indexed = _FIELD_INDEX.match(path)
    if indexed:
        return str((meta.get(indexed.group(1)) or {}).get(indexed.group(2), ""))
    simple = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName"),
        "status.hostIP": status.get("hostIP") or "127.0.0.1",
        "status.podIP": status.get("podIP") or "127.0.0.1",
    }
    if path not in simple:
        raise ConfigError(f"unsupported fieldPath {path!r}")
    return str(simple[path] or "")


def _resource(container: Mapping[str, Any], ref: Mapping[str, Any]) -> str:
    kind, _, name = str(ref.get("resource", "")).partition(".")
    value = ((container.get("resources") or {}).get(kind) or {}).get(name)
    if value is None:
        return "0"
    divisor = ref.get("divisor") or "1"
    whole = amount(name, value) / max(1, amount(name, divisor))
    return str(max(1, round(whole + 0.4999)))
