"""What the stand-in gateway reads from and writes to the API: pure functions over objects.

- the Gateway's data-plane pod and Service (what Istio or kgateway make per Gateway: a
  Service labelled ``gateway.networking.k8s.io/gateway-name``, GEP-1762), owned by the Gateway;
- status conditions as controllers write them (``lastTransitionTime`` kept while the status
  does not change, ``observedGeneration``);
- the EPP's configuration, found the way the EPP pod itself gets it: the pool's
  ``endpointPickerRef`` names the EPP's Service, whose selector picks the EPP pod, whose
  ``--config-text`` holds it, or ``--config-file`` names a file of a mounted ConfigMap.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from kubemu.storage.meta import now

CONTROLLER_NAME = "testbed.io/gateway-stand-in"
#: The GatewayClass the stand-in installs once the Gateway API CRDs are served, as a
#: provider's installation does (Gateways name it in gatewayClassName).
GATEWAY_CLASS = "testbed-gateway-stand-in"
GATEWAY_GROUP = "gateway.networking.k8s.io"
POOL_GROUP = "inference.networking.k8s.io"
GATEWAY_LABEL = "gateway.networking.k8s.io/gateway-name"
#: The data-plane pod's image: unknown to the kubelet, so no process runs; the stand-in
#: listens on the host ports the kubelet gives its container ports.
POD_IMAGE = "testbed.io/gateway-stand-in:data-plane"
KEYS = {
    "GatewayClass": f"gatewayclasses.{GATEWAY_GROUP}",
    "Gateway": f"gateways.{GATEWAY_GROUP}",
    "HTTPRoute": f"httproutes.{GATEWAY_GROUP}",
    "InferencePool": f"inferencepools.{POOL_GROUP}",
}

Obj = Mapping[str, Any]


def gateway_class() -> dict[str, Any]:
    return {
        "apiVersion": f"{GATEWAY_GROUP}/v1",
        "kind": "GatewayClass",
        "metadata": {"name": GATEWAY_CLASS},
        "spec": {
            "controllerName": CONTROLLER_NAME,
            "description": "testbed cluster emulate --gateway-stand-in: a Gateway API and"
            " inference extension implementation played by testbed",
        },
    }


def condition(
    kind: str,
    ok: bool,
    reason: str,
    message: str,
    generation: int,
    previous: Sequence[Obj] = (),
) -> dict[str, Any]:
    status = "True" if ok else "False"
    old = next((c for c in previous if c.get("type") == kind), None)
    since = old.get("lastTransitionTime") if old and old.get("status") == status else None
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": since or now(),
    }


def generation(obj: Obj) -> int:
    return int(obj["metadata"].get("generation") or 1)


def data_plane_name(gateway: Obj) -> str:
    return f"{gateway['metadata']['name']}-gateway-stand-in"


def listener_ports(gateway: Obj) -> list[int]:
    """The ports of the Gateway's HTTP listeners (the only protocol the stand-in serves)."""
    listeners = (gateway.get("spec") or {}).get("listeners") or []
    return sorted({int(lst["port"]) for lst in listeners if lst.get("protocol") == "HTTP"})


_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+)s)?(?:(\d+)ms)?$")


def duration_s(text: str) -> float | None:
    """A Gateway API duration (``300s``, ``1m30s``, ``500ms``, ``0s`` = no limit) in seconds;
    None for no limit. ValueError when it is not one."""
    match = _DURATION.match(text.strip())
    if not text.strip() or match is None:
        raise ValueError(f"{text!r} is not a Gateway API duration (e.g. 300s, 1m, 500ms)")
    hours, minutes, seconds, millis = (int(g) if g else 0 for g in match.groups())
    total = hours * 3600 + minutes * 60 + seconds + millis / 1000
    return total or None


def unsupported(rule: Obj) -> list[str]:
    """What an HTTPRoute rule asks that the stand-in does not do (named, never ignored)."""
    found = [f"filters ({len(rule['filters'])})"] if rule.get("filters") else []
    for match in rule.get("matches") or []:
        found += [
            f"matches.{key}" for key in ("headers", "queryParams", "method") if match.get(key)
        ]
        kind = (match.get("path") or {}).get("type", "PathPrefix")
        if kind not in ("PathPrefix", "Exact"):
            found.append(f"path type {kind}")
    found += [f"timeouts.{k}" for k in (rule.get("timeouts") or {}) if k != "request"]
    return found


def _owned(gateway: Obj) -> dict[str, Any]:
    meta = gateway["metadata"]
    labels = {**(meta.get("labels") or {}), GATEWAY_LABEL: meta["name"]}
    owner = {
        "apiVersion": str(gateway.get("apiVersion") or f"{GATEWAY_GROUP}/v1"),
        "kind": "Gateway",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return {"name": data_plane_name(gateway), "labels": labels, "ownerReferences": [owner]}


def data_plane_pod(gateway: Obj) -> dict[str, Any]:
    ports = [{"name": f"http-{p}", "containerPort": p} for p in listener_ports(gateway)]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _owned(gateway),
        "spec": {"containers": [{"name": "gateway", "image": POD_IMAGE, "ports": ports}]},
    }


def data_plane_service(gateway: Obj) -> dict[str, Any]:
    name = gateway["metadata"]["name"]
    ports = [{"name": f"http-{p}", "port": p, "targetPort": p} for p in listener_ports(gateway)]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _owned(gateway),
        "spec": {"selector": {GATEWAY_LABEL: name}, "ports": ports},
    }


def selects(selector: Mapping[str, str], labels: Mapping[str, str] | None) -> bool:
    labels = labels or {}
    return all(labels.get(k) == v for k, v in selector.items())


def ready(pod: Obj) -> bool:
    if pod["metadata"].get("deletionTimestamp"):
        return False
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def parent_names(route: Obj, namespace: str) -> list[str]:
    """The Gateways (of ``namespace``) an HTTPRoute attaches to."""
    out = []
    for ref in (route.get("spec") or {}).get("parentRefs") or []:
        if (
            ref.get("kind", "Gateway") == "Gateway"
            and ref.get("group", GATEWAY_GROUP) == GATEWAY_GROUP
            and ref.get("namespace", namespace) == namespace
        ):
            out.append(str(ref["name"]))
    return out


def flag(args: Sequence[str], name: str) -> str | None:
    for i, word in enumerate(args):
        flag, has_value, value = word.partition("=")
        if flag == name:
            return value if has_value else (args[i + 1] if i + 1 < len(args) else "")
    return None


def epp_args(pod: Obj) -> list[str]:
    """The EPP container's command line (the container that has a config flag, else the first)."""
    containers = (pod.get("spec") or {}).get("containers") or []
    for container in containers:
        words = [
            str(w) for w in [*(container.get("command") or []), *(container.get("args") or [])]
        ]
        if flag(words, "--config-file") is not None or flag(words, "--config-text") is not None:
            return words
    first = containers[0] if containers else {}
    return [str(w) for w in [*(first.get("command") or []), *(first.get("args") or [])]]


def config_file_source(pod: Obj, path: str) -> tuple[str, str] | None:
    """``(ConfigMap name, key)`` that holds ``path`` inside the EPP pod, if a ConfigMap does."""
    spec = pod.get("spec") or {}
    volumes = {v.get("name"): v for v in spec.get("volumes") or []}
    for container in spec.get("containers") or []:
        for mount in container.get("volumeMounts") or []:
            root = str(mount.get("mountPath", "")).rstrip("/")
            if not path.startswith(root + "/"):
                continue
            source = (volumes.get(mount.get("name")) or {}).get("configMap")
            if not source:
                continue
            relative = path[len(root) + 1 :]
            if mount.get("subPath"):
                relative = f"{mount['subPath']}/{relative}".strip("/")
            key = relative
            for item in source.get("items") or []:
                if item.get("path") == relative:
                    key = str(item.get("key"))
            return str(source.get("name")), key
    return None


def gateway_status(gateway: Obj, programmed: bool, address: str, attached: int) -> dict[str, Any]:
    """Accepted, Programmed once the proxy listens; the address; each listener's status."""
    old = gateway.get("status") or {}
    gen = generation(gateway)
    conds = old.get("conditions") or []
    why = "Programmed" if programmed else "Pending"
    message = "" if programmed else "the stand-in's data-plane pod is not running yet"
    listeners = []
    previous = {lst.get("name"): lst for lst in old.get("listeners") or []}
    for lst in (gateway.get("spec") or {}).get("listeners") or []:
        before = (previous.get(lst.get("name")) or {}).get("conditions") or []
        if lst.get("protocol") != "HTTP":
            why_not = f"the gateway stand-in serves HTTP listeners, not {lst.get('protocol')}"
            listeners.append(
                {
                    "name": lst.get("name"),
                    "supportedKinds": [],
                    "attachedRoutes": 0,
                    "conditions": [
                        condition("Accepted", False, "UnsupportedProtocol", why_not, gen, before),
                        condition("Programmed", False, "Invalid", why_not, gen, before),
                    ],
                }
            )
            continue
        listeners.append(
            {
                "name": lst.get("name"),
                "supportedKinds": [{"group": GATEWAY_GROUP, "kind": "HTTPRoute"}],
                "attachedRoutes": attached,
                "conditions": [
                    condition("Accepted", True, "Accepted", "", gen, before),
                    condition("Programmed", programmed, why, message, gen, before),
                    condition("ResolvedRefs", True, "ResolvedRefs", "", gen, before),
                ],
            }
        )
    return {
        **old,
        "addresses": [{"type": "IPAddress", "value": address}] if programmed and address else [],
        "conditions": [
            condition("Accepted", True, "Accepted", "", gen, conds),
            condition("Programmed", programmed, why, message, gen, conds),
        ],
        "listeners": listeners,
    }


def parent_status(
    obj: Obj,
    parent_ref: Mapping[str, Any],
    problems: Sequence[str],
    controller: bool,
    refused: Sequence[str] = (),
) -> dict[str, Any]:
    """``status.parents`` with this controller's entry for ``parent_ref`` replaced: Accepted
    unless it asks for what the stand-in does not do (``refused``, reason UnsupportedValue),
    ResolvedRefs unless a reference is broken (``problems``)."""
    old = obj.get("status") or {}
    gen = generation(obj)
    entries = list(old.get("parents") or [])
    mine: Mapping[str, Any] = next((p for p in entries if p.get("parentRef") == parent_ref), {})
    conds = mine.get("conditions") or []
    resolved = not problems
    entry: dict[str, Any] = {
        "parentRef": dict(parent_ref),
        "conditions": [
            condition(
                "Accepted",
                not refused,
                "UnsupportedValue" if refused else "Accepted",
                f"not supported by the gateway stand-in: {', '.join(refused)}" if refused else "",
                gen,
                conds,
            ),
            condition(
                "ResolvedRefs",
                resolved,
                "ResolvedRefs" if resolved else "InvalidExtensionRef",
                "; ".join(problems),
                gen,
                conds,
            ),
        ],
    }
    if controller:
        entry["controllerName"] = CONTROLLER_NAME
    others = [p for p in entries if p.get("parentRef") != parent_ref]
    return {**old, "parents": [*others, entry]}
