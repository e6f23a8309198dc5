"""Write emulator/src/kubemu/apiserver/protobuf_schema.json from Kubernetes' generated.proto files.

kubectl's imperative commands (``create namespace``, ``create deployment``, ``run`` …)
send protobuf bodies. The emulator decodes them with a table of field numbers, names and
types of the messages its kinds use, which this script extracts from the ``generated.proto``
files of k8s.io/api and k8s.io/apimachinery (Apache-2.0; field numbers are part of the
wire format and never change). Run it again only to serve new kinds:

    python scripts/emulator_protobuf_schema.py API_CHECKOUT APIMACHINERY_CHECKOUT
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "emulator/src/kubemu/apiserver/protobuf_schema.json"
API_PACKAGES = (
    "core/v1",
    "apps/v1",
    "batch/v1",
    "events/v1",
    "policy/v1",
    "autoscaling/v1",
    "scheduling/v1",
    "rbac/v1",
    "authentication/v1",
    "authorization/v1",
)
MACHINERY = ("pkg/api/resource", "pkg/apis/meta/v1", "pkg/runtime", "pkg/util/intstr")
#: apiVersion → proto package of the kinds the emulator serves.
GROUPS = {
    "v1": "k8s.io.api.core.v1",
    "apps/v1": "k8s.io.api.apps.v1",
    "batch/v1": "k8s.io.api.batch.v1",
    "events.k8s.io/v1": "k8s.io.api.events.v1",
    "policy/v1": "k8s.io.api.policy.v1",
    "autoscaling/v1": "k8s.io.api.autoscaling.v1",
    "scheduling.k8s.io/v1": "k8s.io.api.scheduling.v1",
    "meta.k8s.io/v1": "k8s.io.apimachinery.pkg.apis.meta.v1",
    "rbac.authorization.k8s.io/v1": "k8s.io.api.rbac.v1",
    "authentication.k8s.io/v1": "k8s.io.api.authentication.v1",
    "authorization.k8s.io/v1": "k8s.io.api.authorization.v1",
}
ROOTS = {
    "v1": (
        "Namespace",
        "Node",
        "Pod",
        "Service",
        "Endpoints",
        "Secret",
        "ConfigMap",
        "Event",
        "ServiceAccount",
        "PersistentVolumeClaim",
        "Binding",
    ),
    "apps/v1": ("Deployment", "ReplicaSet"),
    "batch/v1": ("Job",),
    "events.k8s.io/v1": ("Event",),
    "policy/v1": ("Eviction",),
    "autoscaling/v1": ("Scale",),
    "scheduling.k8s.io/v1": ("PriorityClass",),
    "meta.k8s.io/v1": ("DeleteOptions",),
    "rbac.authorization.k8s.io/v1": ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"),
    "authentication.k8s.io/v1": ("TokenRequest", "SelfSubjectReview"),
    "authorization.k8s.io/v1": ("SelfSubjectAccessReview", "SelfSubjectRulesReview"),
}
SCALARS = {"string", "bytes", "bool", "int32", "int64", "uint32", "uint64", "double", "float"}
_FIELD = re.compile(r"^\s*(optional|repeated)\s+([\w.]+)\s+(\w+)\s*=\s*(\d+)\s*;")
_MAP = re.compile(r"^\s*map<\s*([\w.]+)\s*,\s*([\w.]+)\s*>\s+(\w+)\s*=\s*(\d+)\s*;")


def _resolve(package: str, type_name: str) -> str:
    if type_name in SCALARS:
        return type_name
    return type_name[1:] if type_name.startswith(".") else f"{package}.{type_name}"


def parse(path: Path) -> dict[str, dict[str, list[str]]]:
    text = path.read_text()
    package = re.search(r"^package\s+([\w.]+);", text, re.M).group(1)  # type: ignore[union-attr]
    messages: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    for raw_line in text.splitlines():
        line = raw_line.split("//", 1)[0]
        start = re.match(r"^message\s+(\w+)\s*\{", line)
        if start:
            current = messages.setdefault(f"{package}.{start.group(1)}", {})
            continue
        if line.startswith("}"):
            current = None
            continue
        if current is None:
            continue
        if field := _FIELD.match(line):
            label, type_name, name, number = field.groups()
            current[number] = [name, label, _resolve(package, type_name)]
        elif entry := _MAP.match(line):
            key, value, name, number = entry.groups()
            current[number] = [name, "map", _resolve(package, key), _resolve(package, value)]
    return messages


def main() -> int:
    api, machinery = Path(sys.argv[1]), Path(sys.argv[2])
    messages: dict[str, dict[str, list[str]]] = {}
    for package in API_PACKAGES:
        messages.update(parse(api / package / "generated.proto"))
    for package in MACHINERY:
        messages.update(parse(machinery / package / "generated.proto"))
    wanted: dict[str, dict[str, list[str]]] = {}
    todo = [f"{GROUPS[v]}.{kind}" for v, kinds in ROOTS.items() for kind in kinds]
    while todo:
        name = todo.pop()
        if name in wanted or name not in messages:
            continue
        wanted[name] = messages[name]
        todo += [t for field in messages[name].values() for t in field[2:] if t not in SCALARS]
    kinds = {f"{v}/{kind}": f"{GROUPS[v]}.{kind}" for v, names in ROOTS.items() for kind in names}
    OUT.write_text(
        json.dumps({"kinds": kinds, "messages": dict(sorted(wanted.items()))}, indent=0) + "\n"
    )
    print(f"{len(wanted)} messages → {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
