"""The least privilege an exported campaign's ``testbed worker`` needs, derived from the
campaign: the objects the Kubernetes backend renders for its deployments (Secrets,
Datasets, the run's own Namespace, Deployments and Services), what it reads while a worker
runs (its pods, their logs, a port-forward), what its cleanup sweeps by label, in-cluster
probe Jobs when ``backend.probes: cluster``, and the API groups of ``server: manifests``
stacks. Without ``backend.namespace`` each run makes its own namespace, so the rights are a
ClusterRole bound cluster-wide; with one, a Role in that namespace.

One rule per resource, holding exactly the verbs used: the RBAC tests remove each rule in
turn and require the run to ERROR naming it (tests/execution/test_export_rbac.py).
"""

from __future__ import annotations

from typing import Any

from testbed.backends.kubernetes.names import owns_namespace, settings_of
from testbed.config.loader import LoadedCampaign
from testbed.config.stacks import StackDeployment

Rule = dict[str, Any]
#: (kind of a rendered run object) → (API group, resource).
_KINDS = {
    "Namespace": ("", "namespaces"),
    "Secret": ("", "secrets"),
    "Service": ("", "services"),
    "Deployment": ("apps", "deployments"),
    "Dataset": ("datashim.io", "datasets"),
}
#: What every run reads and sweeps (cleanup lists each kind of run_cleanup.RUN_KINDS by label
#: and deletes what it finds; readiness follows the Deployment's ReplicaSet and pods).
_BASE: dict[tuple[str, str], set[str]] = {
    ("", "pods"): {"list", "watch", "delete"},
    ("", "pods/log"): {"get"},  # the server's log into the run directory
    ("", "pods/portforward"): {"get"},  # the probe reaches the server through the API
    ("", "services"): {"list"},
    ("", "secrets"): {"list"},
    ("", "configmaps"): {"list"},
    ("apps", "deployments"): {"list"},
    ("apps", "replicasets"): {"get", "list"},
    ("batch", "jobs"): {"list"},
}
#: Read only when a worker fails to start: the pod's last Warning events name the cause.
DIAGNOSTIC = {("", "events"): {"list"}}
_VERB_ORDER = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")


def worker_rules(loaded: LoadedCampaign) -> list[Rule]:
    """The rules (namespaced resources, plus ``namespaces`` when a run makes its own)."""
    need = {key: set(verbs) for key, verbs in {**_BASE, **DIAGNOSTIC}.items()}
    for kind in _rendered_kinds(loaded):
        group, resource = _KINDS[kind]
        verbs = {"create", "delete"}
        if kind == "Namespace":
            verbs.add("get")  # cleanup waits until the namespace is gone
        if kind == "Dataset":
            verbs.add("list")  # swept by label like the other kinds
        need.setdefault((group, resource), set()).update(verbs)
    backend = settings_of(loaded.campaign.backend)
    if backend.datashim and not owns_namespace(backend):
        need[("", "namespaces")] = {"patch"}  # the Datashim label on the given namespace
    if backend.remote_probes:
        need[("", "configmaps")] |= {"create", "delete"}
        need[("batch", "jobs")] |= {"create", "get", "watch", "delete"}
        need[("", "pods")] |= {"get"}
    rules = [
        {"apiGroups": [group], "resources": [resource],
         "verbs": [v for v in _VERB_ORDER if v in verbs]}
        for (group, resource), verbs in sorted(need.items())
    ]  # fmt: skip
    return [*rules, *stack_rules(loaded)]


def rbac_objects(loaded: LoadedCampaign, namespace: str, account: str) -> list[dict[str, Any]]:
    """The Role and RoleBinding (or, when each run makes its namespace, the ClusterRole and
    ClusterRoleBinding) that give ServiceAccount ``namespace/account`` what it needs."""
    api = "rbac.authorization.k8s.io/v1"
    labels = {"app.kubernetes.io/managed-by": "testbed"}
    subject = {"kind": "ServiceAccount", "name": account, "namespace": namespace}
    rules = worker_rules(loaded)
    given = settings_of(loaded.campaign.backend).namespace
    if given is None:
        name = f"{namespace}-{account}"  # cluster-scoped: unique per pipeline namespace
        meta: dict[str, Any] = {"name": name, "labels": labels}
        role_kind, binding_kind = "ClusterRole", "ClusterRoleBinding"
    else:
        meta = {"name": account, "namespace": given, "labels": labels}
        role_kind, binding_kind = "Role", "RoleBinding"
    return [
        {"apiVersion": api, "kind": role_kind, "metadata": dict(meta), "rules": rules},
        {"apiVersion": api, "kind": binding_kind, "metadata": dict(meta),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind,
                     "name": meta["name"]},
         "subjects": [subject]},
    ]  # fmt: skip


def _rendered_kinds(loaded: LoadedCampaign) -> set[str]:
    """The kinds the backend creates for this campaign's deployments (rendered, not guessed)."""
    from testbed.backends.kubernetes import manifests

    backend = settings_of(loaded.campaign.backend)
    workers = {
        f"d{i}": d
        for i, d in enumerate(loaded.campaign.deployments)
        if not isinstance(d, StackDeployment)
    }
    namespace = backend.namespace or "testbed-export"
    objects = manifests.run_objects(
        "export", namespace, owns_namespace(backend), workers, backend, lambda ref: "redacted"
    )
    return {o["kind"] for o in objects if o["kind"] in _KINDS}


def stack_rules(loaded: LoadedCampaign) -> list[Rule]:
    """Rights on the API groups the campaign's stacks create objects in (every resource of
    each group: plurals are known only to the cluster's discovery). Cluster-scoped objects
    such as CRDs need a ClusterRole, which docs/stacks.md leaves to the cluster's admin."""
    from testbed.backends.kubernetes.stack import render_worker

    backend = settings_of(loaded.campaign.backend)
    groups: set[str] = set()
    for deployment in loaded.campaign.deployments:
        if isinstance(deployment, StackDeployment):
            objects = render_worker("export", deployment.name, deployment, backend, loaded.base_dir)
            groups |= {o.api_version.rpartition("/")[0] for o in objects}
    if not groups:
        return []
    # A stack applies, reads back and deletes objects of kinds only its manifests name:
    # every resource of their groups (CRDs need a cluster admin, see docs/stacks.md).
    groups -= {"apiextensions.k8s.io"}
    verbs = ["get", "list", "watch", "create", "update", "patch", "delete"]
    return [{"apiGroups": sorted(groups), "resources": ["*"], "verbs": verbs}]
