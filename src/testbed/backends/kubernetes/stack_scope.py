"""Which of a stack's objects are cluster-scoped (pure: rendered objects in, a yes or no out).

One answer for both sides of an export: the objects it writes into ``admin.yaml`` for a
cluster admin to apply (:func:`testbed.backends.kubernetes.stack_rbac.admin_objects`), and
the objects a worker of an exported campaign (``backend.cluster_objects: admin``) leaves
alone instead of POSTing them (:mod:`.stack`). A namespaced Role cannot grant any of them,
so a runner that wrote one would need a ClusterRole — rights across the whole cluster.
"""

from __future__ import annotations

from testbed.backends.kubernetes.stack_render import StackObject
from testbed.clients.kube.rest import KINDS

CRD = "CustomResourceDefinition"
#: Built-in kinds that are cluster-scoped (and so never in a namespaced Role), beside those
#: the client's own kind table knows.
CLUSTER_SCOPED = frozenset(
    {
        CRD,
        "ClusterRole",
        "ClusterRoleBinding",
        "Namespace",
        "PriorityClass",
        "StorageClass",
        "IngressClass",
        "GatewayClass",
        "RuntimeClass",
        "PersistentVolume",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "APIService",
        "CSIDriver",
    }
)


def is_cluster_scoped(item: StackObject, objects: list[StackObject]) -> bool:
    """Built-in cluster-scoped kinds, and kinds of the stack's own Cluster-scoped CRDs."""
    known = KINDS.get(item.kind)
    if known is not None and known.api_version == item.api_version:
        return not known.namespaced
    if item.kind in CLUSTER_SCOPED:
        return True
    group = item.api_version.rpartition("/")[0]
    return any(
        o.kind == CRD
        and (o.obj.get("spec") or {}).get("group") == group
        and ((o.obj.get("spec") or {}).get("names") or {}).get("kind") == item.kind
        and (o.obj.get("spec") or {}).get("scope") == "Cluster"
        for o in objects
    )
