"""Labelling a workload object so that the pods it makes carry the labels too.

A controller copies its pod template's labels onto each pod it creates, so a label meant to
reach the pods goes on the object and on every pod template inside it — wherever the kind
keeps one (a Deployment's ``spec.template``, a Job's, a PyTorchJob's replica specs …): a
mapping named ``template`` whose ``spec`` has a list of containers. Used by the Kubernetes
backend (a stack's objects) and the scale probe (its workloads).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any


def labelled(obj: Mapping[str, Any], labels: Mapping[str, str]) -> dict[str, Any]:
    """A copy of ``obj`` with ``labels`` on it and on every pod template inside it. An
    ``app.kubernetes.io/`` label the object already has stays (a selector may hold it, as
    Helm's managed-by)."""
    out = copy.deepcopy(dict(obj))
    if not labels:
        return out
    _add_labels(out, labels)
    for pod_template in pod_templates(out.get("spec")):
        _add_labels(pod_template, labels)
    return out


def pod_templates(node: Any) -> Iterator[dict[str, Any]]:
    """Every pod template in ``node`` (a spec), wherever a controller keeps it."""
    if isinstance(node, dict):
        for key, value in node.items():
            spec = value.get("spec") if isinstance(value, dict) else None
            if (
                # LeaderWorkerSet keeps two: leaderWorkerTemplate.leaderTemplate/workerTemplate
                (key == "template" or key.endswith("Template"))
                and isinstance(spec, dict)
                and isinstance(spec.get("containers"), list)
            ):
                yield value
            yield from pod_templates(value)
    elif isinstance(node, list):
        for item in node:
            yield from pod_templates(item)


def _add_labels(obj: dict[str, Any], labels: Mapping[str, str]) -> None:
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        metadata = obj["metadata"] = {}
    if not isinstance(metadata.get("labels"), dict):
        metadata["labels"] = {}
    mine = metadata["labels"]
    for key, value in labels.items():
        if not (key.startswith("app.kubernetes.io/") and key in mine):
            mine[key] = value
