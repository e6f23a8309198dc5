"""How an exported pipeline's files reach a cluster: the commands ``testbed export`` prints
and docs/export.md shows — one list, so what is printed is what the tests run.

The support objects are applied server-side (``kubectl apply --server-side``). A client-side
``kubectl apply`` copies the whole object into its ``last-applied-configuration``
annotation, and annotations may hold 256 KiB in all (:mod:`kubefacts.limits`): a
campaign ConfigMap that ships a stack's CRDs (~700 KB for llm-d's inference scheduling)
would be refused by a real API server, and the Secret's values would sit in plain text in
an annotation ``kubectl describe`` prints. The pipeline run itself is created (its name is
generated). A stack's cluster-scoped objects (CRDs, ClusterRoles, webhooks) are in
``admin.yaml``: a cluster admin applies it first, with their own credentials; the runner's
namespaced Role could not.
"""

from __future__ import annotations

#: The file of each engine's pipeline run.
MAIN_FILE = {"tekton": "pipelinerun.yaml", "argo": "workflow.yaml"}
#: Applied in this order: the namespace first, then what lives in it.
SUPPORT_FILES = ("namespace.yaml", "rbac.yaml", "campaign.yaml")
APPLY = "kubectl apply --server-side"
#: The cluster admin's file: a stack's cluster-scoped objects.
ADMIN_FILE = "admin.yaml"


def apply_commands(folder: str, main_file: str, admin: bool = False) -> list[str]:
    """The shell lines that apply an export written to ``folder`` (``main_file``: the
    PipelineRun's or the Workflow's file; ``admin``: whether it has an ``admin.yaml``)."""
    support = " ".join(f"-f {folder}/{name}" for name in SUPPORT_FILES)
    first = [f"{APPLY} -f {folder}/{ADMIN_FILE}  # by a cluster admin, once"] if admin else []
    return [
        *first,
        f"{APPLY} {support}",
        f"envsubst < {folder}/secret.yaml | {APPLY} -f -",
        f"kubectl create -f {folder}/{main_file}",
    ]
