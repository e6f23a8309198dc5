"""How an exported pipeline's files reach a cluster: the commands ``testbed export`` prints
and docs/export.md shows — one list, so what is printed is what the tests run.

The support objects are applied server-side (``kubectl apply --server-side``). A client-side
``kubectl apply`` copies the whole object into its ``last-applied-configuration``
annotation, and annotations may hold 256 KiB in all (:mod:`testbed.core.kube.limits`): a
campaign ConfigMap that ships a stack's CRDs (~700 KB for llm-d's inference scheduling)
would be refused by a real API server, and the Secret's values would sit in plain text in
an annotation ``kubectl describe`` prints. The pipeline run itself is created (its name is
generated).
"""

from __future__ import annotations

#: The file of each engine's pipeline run.
MAIN_FILE = {"tekton": "pipelinerun.yaml", "argo": "workflow.yaml"}
#: Applied in this order: the namespace first, then what lives in it.
SUPPORT_FILES = ("namespace.yaml", "rbac.yaml", "campaign.yaml")
APPLY = "kubectl apply --server-side"


def apply_commands(folder: str, main_file: str) -> list[str]:
    """The shell lines that apply an export written to ``folder`` (``main_file``: the
    PipelineRun's or the Workflow's file)."""
    support = " ".join(f"-f {folder}/{name}" for name in SUPPORT_FILES)
    return [
        f"{APPLY} {support}",
        f"envsubst < {folder}/secret.yaml | {APPLY} -f -",
        f"kubectl create -f {folder}/{main_file}",
    ]
