"""The least privilege an exported campaign's ``testbed worker`` needs, derived from what
the run will do: the objects the Kubernetes backend renders for its deployments (Secrets,
Datasets, Deployments and Services), what it reads while a worker runs (its pods, their
logs, a port-forward), what its cleanup sweeps by label, in-cluster probe Jobs when
``backend.probes: cluster``, and for ``server: manifests`` stacks the kinds and verbs of the
rendered stack (:mod:`.stack_rbac`).

The rights are always a Role in the namespace the workers run in — the campaign's
``backend.namespace``, else the pipeline's own (the export writes it into the campaign): a
ClusterRole would reach every namespace of a shared cluster. Never ``*``, never
``escalate``, ``bind`` or ``impersonate``; Secrets only by name (``resourceNames``: a LIST of
Secrets returns every Secret's value), except ``create``, which RBAC cannot limit by name.
Cluster-scoped prerequisites (CRDs, ClusterRoles a chart needs) are the cluster admin's
(:func:`admin_objects`); the runner's Role never gets them.

One rule per resource, holding exactly the verbs used: the RBAC tests pin these rules per
example campaign and remove each rule in turn (tests/execution/test_export_rbac.py).
"""

from __future__ import annotations

from typing import Any

from testbed.backends.kubernetes.names import settings_of
from testbed.backends.kubernetes.stack_rbac import admin_objects as stack_admin_objects
from testbed.backends.kubernetes.stack_rbac import rendered, stack_needs
from testbed.config.backend_settings import KubernetesSettings
from testbed.config.loader import LoadedCampaign
from testbed.config.stacks import StackDeployment

Rule = dict[str, Any]
#: (kind of a rendered run object) → (API group, resource).
_KINDS = {
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
    ("", "configmaps"): {"list"},
    ("apps", "deployments"): {"list"},
    ("apps", "replicasets"): {"get", "list"},
    ("batch", "jobs"): {"list"},
}
#: Read only when a worker fails to start: the pod's last Warning events name the cause.
DIAGNOSTIC = {("", "events"): {"list"}}
_VERB_ORDER = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")


def worker_namespace(loaded: LoadedCampaign, pipeline_namespace: str) -> str:
    """Where an exported task's workers run: the campaign's namespace, else the pipeline's."""
    return settings_of(loaded.campaign.backend).namespace or pipeline_namespace


def exported_settings(loaded: LoadedCampaign, pipeline_namespace: str) -> KubernetesSettings:
    """The campaign's backend settings as an exported task runs them (in one namespace)."""
    backend = settings_of(loaded.campaign.backend)
    namespace = worker_namespace(loaded, pipeline_namespace)
    return backend.model_copy(update={"namespace": namespace, "cluster_objects": "admin"})


def worker_rules(loaded: LoadedCampaign, pipeline_namespace: str) -> list[Rule]:
    """The rules of the runner's Role in :func:`worker_namespace`."""
    backend = exported_settings(loaded, pipeline_namespace)
    need = {key: set(verbs) for key, verbs in {**_BASE, **DIAGNOSTIC}.items()}
    secrets: set[str] = set()
    for obj in _run_objects(loaded, backend):
        if obj["kind"] == "Secret":
            secrets.add(obj["metadata"]["name"])
            continue
        group, resource = _KINDS[obj["kind"]]
        verbs = {"create", "delete"}
        if obj["kind"] == "Dataset":
            verbs.add("list")  # swept by label like the other kinds
        need.setdefault((group, resource), set()).update(verbs)
    if backend.datashim:
        need[("", "namespaces")] = {"patch"}  # the Datashim label on the namespace
    if backend.remote_probes:
        need[("", "configmaps")] |= {"create", "delete"}
        need[("batch", "jobs")] |= {"create", "get", "watch", "delete"}
        need[("", "pods")] |= {"get"}
    stacks = [d for d in loaded.campaign.deployments if isinstance(d, StackDeployment)]
    granted: list[Rule] = []
    if stacks:
        objects = rendered(stacks, backend, loaded.base_dir)
        extra, granted = stack_needs(stacks, objects)
        for key, verbs in extra.items():
            need.setdefault(key, set()).update(verbs)
        for rule in [r for r in granted if not r.get("resourceNames")]:
            for group in rule.get("apiGroups") or []:
                for resource in rule.get("resources") or []:
                    need.setdefault((group, resource), set()).update(rule.get("verbs") or [])
        granted = [r for r in granted if r.get("resourceNames")]
    rules = [
        {"apiGroups": [group], "resources": [resource],
         "verbs": [v for v in _VERB_ORDER if v in verbs]}
        for (group, resource), verbs in sorted(need.items())
    ]  # fmt: skip
    if backend.datashim:
        index = rules.index({"apiGroups": [""], "resources": ["namespaces"], "verbs": ["patch"]})
        rules[index]["resourceNames"] = [str(backend.namespace)]
    rules += _secret_rules(sorted(secrets))
    # the Roles a stack ships: written and bound only by whom holds their rules already
    return rules + [r for r in granted if not any(_covers(have, r) for have in rules)]


def _secret_rules(names: list[str]) -> list[Rule]:
    """Create (RBAC cannot limit it by name), then read, replace (``--resume``) and delete
    the run's own Secrets by name: never a LIST, which returns every Secret's value."""
    if not names:
        return []
    return [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "update", "delete"],
         "resourceNames": names},
    ]  # fmt: skip


def _covers(have: Rule, wanted: Rule) -> bool:
    """Whether ``have`` already grants all of ``wanted`` (same names, no wildcards)."""
    return (
        set(wanted.get("apiGroups") or []) <= set(have["apiGroups"])
        and set(wanted.get("resources") or []) <= set(have["resources"])
        and set(wanted.get("verbs") or []) <= set(have["verbs"])
        and not have.get("resourceNames")
    )


def rbac_objects(loaded: LoadedCampaign, namespace: str, account: str) -> list[dict[str, Any]]:
    """The Role and RoleBinding that give ServiceAccount ``namespace/account`` what its
    tasks need, in the namespace the workers run in."""
    api = "rbac.authorization.k8s.io/v1"
    labels = {"app.kubernetes.io/managed-by": "testbed"}
    subject = {"kind": "ServiceAccount", "name": account, "namespace": namespace}
    meta = {"name": account, "namespace": worker_namespace(loaded, namespace), "labels": labels}
    return [
        {"apiVersion": api, "kind": "Role", "metadata": dict(meta),
         "rules": worker_rules(loaded, namespace)},
        {"apiVersion": api, "kind": "RoleBinding", "metadata": dict(meta),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                     "name": meta["name"]},
         "subjects": [subject]},
    ]  # fmt: skip


def admin_objects(loaded: LoadedCampaign, namespace: str) -> list[dict[str, Any]]:
    """What a cluster admin applies before the pipeline runs: the stacks' cluster-scoped
    objects (CRDs, ClusterRoles), which the runner's Role never grants."""
    stacks = [d for d in loaded.campaign.deployments if isinstance(d, StackDeployment)]
    if not stacks:
        return []
    backend = exported_settings(loaded, namespace)
    return stack_admin_objects(rendered(stacks, backend, loaded.base_dir))


def _run_objects(loaded: LoadedCampaign, backend: KubernetesSettings) -> list[dict[str, Any]]:
    """The objects the backend creates for this campaign's deployments (rendered, not
    guessed); the namespace is given, so it is not among them."""
    from testbed.backends.kubernetes import manifests

    workers = {
        f"d{i}": d
        for i, d in enumerate(loaded.campaign.deployments)
        if not isinstance(d, StackDeployment)
    }
    assert backend.namespace is not None
    objects = manifests.run_objects(
        "export", backend.namespace, False, workers, backend, lambda ref: "redacted"
    )
    return [o for o in objects if o["kind"] in _KINDS]
