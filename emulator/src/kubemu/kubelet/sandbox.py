"""A pod's sandbox on this host: its ports, its volumes as directories, each container's launch.

Ports: every ``containerPort`` of every container gets a free 127.0.0.1 port (containers
of a pod share a network namespace, so one map serves the pod; port-forward uses it).
Volumes: ``emptyDir`` and projected kinds → a directory under the pod's scratch dir,
removed with the pod; ``persistentVolumeClaim`` → ``<state>/pvc/<namespace>/<claim>``, kept
across pods as a claim's data is; ``configMap``/``secret`` → their keys written as files;
``hostPath`` → that path. Each container's ``mountPath`` (plus ``subPath``) maps to the host
directory; args and env values naming a mount path are rewritten (``kubelet.environment``).
"""

from __future__ import annotations

import base64
import os
import shutil
import socket
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubemu.kubelet.container import Launch
from kubemu.kubelet.environment import (
    ConfigError,
    Lookup,
    expand,
    relocate,
    resolve_env,
)
from kubemu.kubelet.images import ImageRules, NotRunnable, host_argv

#: A volume driver plugged into the kubelet (Datashim's is ``standins.datashim_mounts.fill``):
#: ``fill(pod, volumes, lookup)`` fills the host directories of the pod's volumes it serves
#: (``volumes``: volume name → directory) before the containers start, raising
#: :class:`MountError` when it cannot.
VolumeDriver = Callable[[Mapping[str, Any], Mapping[str, Path], Lookup], Awaitable[object]]
#: Host variables a container process inherits (it needs an interpreter and its imports).
PASSTHROUGH = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV")


class MountError(Exception):
    """A volume could not be filled; the message is the kubelet's FailedMount note."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Sandbox:
    """Host resources of one pod."""

    scratch: Path
    ports: dict[int, int] = field(default_factory=dict)
    volumes: dict[str, Path] = field(default_factory=dict)

    def remove(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)


def make_sandbox(
    pod: Mapping[str, Any], state_dir: Path, lookup: Lookup, rules: ImageRules | None = None
) -> Sandbox:
    """Allocate ports (declared ones, and those ``rules`` say an image binds undeclared)
    and prepare volume directories for ``pod``."""
    meta, spec = pod["metadata"], pod.get("spec") or {}
    sandbox = Sandbox(state_dir / "pods" / str(meta["uid"]))  # made when a process needs it
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        undeclared = rules.listens(str(container.get("image") or "")) if rules else ()
        declared = [int(port["containerPort"]) for port in container.get("ports") or []]
        for inside in [*declared, *undeclared]:
            if inside not in sandbox.ports:
                sandbox.ports[inside] = free_port()
    for volume in spec.get("volumes") or []:
        sandbox.volumes[volume["name"]] = _volume_dir(volume, meta, sandbox, state_dir, lookup)
    return sandbox


def _volume_dir(
    volume: Mapping[str, Any],
    meta: Mapping[str, Any],
    sandbox: Sandbox,
    state_dir: Path,
    lookup: Lookup,
) -> Path:
    name = str(volume["name"])
    if "persistentVolumeClaim" in volume:
        claim = str(volume["persistentVolumeClaim"].get("claimName"))
        path = state_dir / "pvc" / str(meta.get("namespace", "default")) / claim
    elif "hostPath" in volume:
        return Path(str(volume["hostPath"].get("path")))
    else:
        path = sandbox.scratch / "volumes" / name
    path.mkdir(parents=True, exist_ok=True)
    for kind, field_name in (("ConfigMap", "configMap"), ("Secret", "secret")):
        source = volume.get(field_name)
        if source is None:
            continue
        ref = str(source.get("name") or source.get("secretName"))
        obj = lookup(kind, str(meta.get("namespace", "default")), ref)
        if obj is None:
            if source.get("optional"):
                continue
            raise ConfigError(f'{kind.lower()} "{ref}" not found')
        _write_keys(path, obj, kind, source.get("items"))
    return path


def _write_keys(path: Path, obj: Mapping[str, Any], kind: str, items: Any) -> None:
    data: dict[str, bytes] = {}
    for key, value in (obj.get("data") or {}).items():
        data[key] = base64.b64decode(value) if kind == "Secret" else str(value).encode()
    chosen = {i["key"]: i.get("path", i["key"]) for i in items} if items else {k: k for k in data}
    for key, relative in chosen.items():
        if key in data:
            target = path / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data[key])


def launch_for(
    container: Mapping[str, Any],
    pod: Mapping[str, Any],
    sandbox: Sandbox,
    rules: ImageRules,
    lookup: Lookup,
    services: Mapping[str, str] | None = None,
) -> Launch:
    """The host argv, env and cwd of ``container`` (ConfigError when its config is broken);
    ``services``: the Service variables of its namespace (``kubelet.services``), already
    host addresses, so they are not moved again."""
    mounts = sorted(
        (
            (
                str(m["mountPath"]),
                str(sandbox.volumes[m["name"]] / str(m.get("subPath") or "")).rstrip("/"),
            )
            for m in container.get("volumeMounts") or []
            if m.get("name") in sandbox.volumes
        ),
        key=lambda pair: -len(pair[0]),
    )
    for _, host in mounts:
        Path(host).mkdir(parents=True, exist_ok=True)
    env = resolve_env(container, pod, lookup, services)
    moved = {
        name: value
        if services and services.get(name) == value
        else relocate(value, sandbox.ports, mounts)
        for name, value in env.items()
    }

    def place(parts: Any) -> list[str]:
        return [relocate(expand(str(p), env), sandbox.ports, mounts) for p in parts or []]

    relocated = {
        **container,
        "command": place(container.get("command")),
        "args": place(container.get("args")),
    }
    host_env = {k: os.environ[k] for k in PASSTHROUGH if k in os.environ}
    host_env.update(moved)
    host_env["HOSTNAME"] = str(pod["metadata"]["name"])
    cwd = sandbox.scratch
    if rules.family(str(container.get("image") or "")) != "unknown":
        cwd.mkdir(parents=True, exist_ok=True)
    if container.get("workingDir"):
        wanted = Path(relocate(str(container["workingDir"]), {}, mounts))
        cwd = wanted if wanted.is_dir() else cwd
    played = rules.pod_stand_in(str(container.get("image") or ""))
    argv: list[str] | None
    try:
        if played is not None:
            argv, note = played(
                rules.python,
                str(container.get("image")),
                relocated["command"],
                relocated["args"],
                host_env,
                sandbox.ports,
                dict(mounts),
            )
        else:
            argv, note = host_argv(relocated, rules)
    except NotRunnable as exc:
        return Launch(None, host_env, cwd, sandbox.ports, start_error=str(exc))
    return Launch(argv, host_env, cwd, sandbox.ports, note=note)
