"""The resource types the emulator serves: built-in kinds plus those CRDs register.

A :class:`ResourceType` is one (group, version, plural) as discovery lists it. Objects of a
type live in the store under its ``key`` — ``pods``, ``deployments.apps``,
``datasets.com.ie.ibm.hpsys`` — the names kubectl accepts; two types may share a key
(core/v1 and events.k8s.io/v1 ``Event`` are two views of one storage).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class ResourceType:
    """One served (group, version, plural)."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    #: Subresources served beside the object: "status", "scale", "log", …
    subresources: tuple[str, ...] = ()
    #: The store key when it differs from the default (views onto another type's storage).
    storage: str = ""
    #: CRD additionalPrinterColumns (name, type, jsonPath) for Table output.
    printer_columns: tuple[tuple[str, str, str], ...] = field(default=(), compare=False)
    #: Where /scale reads and writes: (spec replicas, status replicas, label selector) paths;
    #: a selector path of "" means the workload's ``spec.selector.matchLabels``.
    scale_paths: tuple[str, str, str] = field(
        default=(".spec.replicas", ".status.replicas", ""), compare=False
    )

    @property
    def key(self) -> str:
        if self.storage:
            return self.storage
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources


def _core(kind: str, plural: str, namespaced: bool = True, **kw: object) -> ResourceType:
    return ResourceType("", "v1", kind, plural, namespaced, **kw)  # type: ignore[arg-type]


#: Built-in kinds, in the order discovery lists them.
BUILTIN: tuple[ResourceType, ...] = (
    _core(
        "Namespace", "namespaces", False, short_names=("ns",), subresources=("status", "finalize")
    ),
    _core("Node", "nodes", False, short_names=("no",), subresources=("status",)),
    _core(
        "Pod",
        "pods",
        short_names=("po",),
        categories=("all",),
        subresources=("status", "log", "portforward", "exec", "binding", "eviction"),
    ),
    _core(
        "Service", "services", short_names=("svc",), categories=("all",), subresources=("status",)
    ),
    _core("Endpoints", "endpoints", short_names=("ep",)),
    _core("Secret", "secrets"),
    _core("ConfigMap", "configmaps", short_names=("cm",)),
    _core("Event", "events", short_names=("ev",)),
    _core("ServiceAccount", "serviceaccounts", short_names=("sa",), subresources=("token",)),
    _core(
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        short_names=("pvc",),
        subresources=("status",),
    ),
    ResourceType(
        "apps",
        "v1",
        "Deployment",
        "deployments",
        True,
        short_names=("deploy",),
        categories=("all",),
        subresources=("status", "scale"),
    ),
    ResourceType(
        "apps",
        "v1",
        "ReplicaSet",
        "replicasets",
        True,
        short_names=("rs",),
        categories=("all",),
        subresources=("status", "scale"),
    ),
    ResourceType(
        "apps",
        "v1",
        "DaemonSet",
        "daemonsets",
        True,
        short_names=("ds",),
        categories=("all",),
        subresources=("status",),
    ),
    ResourceType(
        "apps",
        "v1",
        "StatefulSet",
        "statefulsets",
        True,
        short_names=("sts",),
        categories=("all",),
        subresources=("status", "scale"),
    ),
    ResourceType("batch", "v1", "Job", "jobs", True, categories=("all",), subresources=("status",)),
    ResourceType("coordination.k8s.io", "v1", "Lease", "leases", True),
    ResourceType(
        "scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", False, short_names=("pc",)
    ),
    ResourceType(
        "events.k8s.io", "v1", "Event", "events", True, short_names=("ev",), storage="events"
    ),
    # RBAC objects: the API server's authorizer (apiserver/rbac.py) evaluates them.
    ResourceType("rbac.authorization.k8s.io", "v1", "Role", "roles", True),
    ResourceType("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", True),
    ResourceType("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", False),
    ResourceType(
        "rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", False
    ),
    ResourceType(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        False,
        short_names=("crd", "crds"),
        categories=("api-extensions",),
        subresources=("status",),
    ),
)

#: Groups whose types are built in; CRDs may not claim them.
BUILTIN_GROUPS = frozenset(rt.group for rt in BUILTIN)


class Registry:
    """Every served type, looked up by URL parts or store key; CRDs add and remove theirs."""

    def __init__(self) -> None:
        self._by_path: dict[tuple[str, str, str], ResourceType] = {}
        for rt in BUILTIN:
            self.add(rt)

    def add(self, rt: ResourceType) -> None:
        self._by_path[(rt.group, rt.version, rt.plural)] = rt

    def remove_group_plural(self, group: str, plural: str) -> None:
        for path in [p for p in self._by_path if p[0] == group and p[2] == plural]:
            del self._by_path[path]

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_path.get((group, version, plural))

    def by_key(self, key: str) -> ResourceType:
        """The type whose storage is ``key`` (the preferred view when several share it)."""
        for rt in self._by_path.values():
            if rt.key == key:
                return rt
        raise KeyError(key)

    def storage_keys(self) -> list[str]:
        return list(dict.fromkeys(rt.key for rt in self._by_path.values()))

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(list(self._by_path.values()))

    def group_versions(self) -> dict[str, list[str]]:
        """Group → its versions (core group is ""), in registration order."""
        out: dict[str, list[str]] = {}
        for group, version, _ in self._by_path:
            versions = out.setdefault(group, [])
            if version not in versions:
                versions.append(version)
        return out

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [rt for (g, v, _), rt in self._by_path.items() if g == group and v == version]
