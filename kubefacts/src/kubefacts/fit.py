"""Does a pod fit a node? The scheduler's filters as pure functions, and its failure message.

The emulator's scheduler places pods with them; the Kubernetes backend asks them whether any
node of a real cluster can ever hold a worker's pod, before it creates one.

The filters run in the real scheduler's order and stop at the first that fails, as
``RunFilterPlugins`` does: NodeUnschedulable, TaintToleration, NodeAffinity (nodeSelector
and required node affinity), NodeResourcesFit. A pod that fits nowhere gets the message
``FitError.Error()`` writes, preemption part included::

    0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are
    available: 3 No preemption victims found for incoming pod.

Nodes failing a filter that preemption cannot change (taints, selector, cordon) say
"Preemption is not helpful for scheduling" in the second part; nodes short of resources
say "No preemption victims found" (the emulator never preempts).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kubefacts.ids import canonical_json
from kubefacts.quantity import PODS, amounts, pod_requests

UNSCHEDULABLE = "node(s) were unschedulable"
SELECTOR = "node(s) didn't match Pod's node affinity/selector"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
_CORDON_TAINT = "node.kubernetes.io/unschedulable"
#: Unique per node: kept out of NodeFacts so that alike nodes share one (the emulator's
#: scheduler buckets alike nodes).
HOSTNAME = "kubernetes.io/hostname"
_BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


@dataclass(frozen=True)
class NodeFacts:
    """What the filters read of a node but its free capacity (hashable: alike nodes share it)."""

    labels: tuple[tuple[str, str], ...]
    taints: tuple[tuple[str, str, str], ...]  # (key, value, effect)
    unschedulable: bool
    allocatable: tuple[tuple[str, int], ...]

    @classmethod
    def of(cls, node: Mapping[str, Any]) -> NodeFacts:
        spec = node.get("spec") or {}
        status = node.get("status") or {}
        labels = dict((node.get("metadata") or {}).get("labels") or {})
        labels.pop(HOSTNAME, None)
        taints = tuple(
            (str(t.get("key", "")), str(t.get("value", "")), str(t.get("effect", "")))
            for t in spec.get("taints") or []
        )
        allocatable = amounts(status.get("allocatable") or status.get("capacity"))
        return cls(
            labels=tuple(sorted((str(k), str(v)) for k, v in labels.items())),
            taints=taints,
            unschedulable=bool(spec.get("unschedulable")),
            allocatable=tuple(sorted(allocatable.items())),
        )


@dataclass(frozen=True)
class PodFacts:
    """What the filters read of a pod."""

    requests: tuple[tuple[str, int], ...]
    tolerations: tuple[Mapping[str, Any], ...] = ()
    node_selector: tuple[tuple[str, str], ...] = ()
    affinity_terms: tuple[Mapping[str, Any], ...] = ()
    #: Canonical text of the non-resource constraints: pods alike share filter results.
    constraints_key: str = field(default="", compare=False)
    #: The constraints name ``kubernetes.io/hostname``: nodes must be checked one by one.
    host_pinned: bool = False

    @classmethod
    def of(cls, pod: Mapping[str, Any]) -> PodFacts:
        spec = pod.get("spec") or {}
        affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        ) or {}
        tolerations = tuple(spec.get("tolerations") or ())
        selector = tuple(sorted((spec.get("nodeSelector") or {}).items()))
        terms = tuple(affinity.get("nodeSelectorTerms") or ())
        return cls(
            requests=tuple(sorted(pod_requests(pod).items())),
            tolerations=tolerations,
            node_selector=selector,
            affinity_terms=terms,
            constraints_key=canonical_json([tolerations, selector, terms]),
            host_pinned=HOSTNAME in canonical_json([selector, terms]),
        )


def static_reason(pod: PodFacts, node: NodeFacts) -> str | None:
    """The first failing filter that does not depend on free capacity, or None."""
    if node.unschedulable and not _tolerates(pod.tolerations, _CORDON_TAINT, "", "NoSchedule"):
        return UNSCHEDULABLE
    for key, value, effect in node.taints:
        if effect in _BLOCKING_EFFECTS and not _tolerates(pod.tolerations, key, value, effect):
            return f"node(s) had untolerated taint {{{key}: {value}}}"
    labels = dict(node.labels)
    if any(labels.get(k) != v for k, v in pod.node_selector):
        return SELECTOR
    if pod.affinity_terms and not any(_term_matches(t, labels) for t in pod.affinity_terms):
        return SELECTOR
    return None


def with_hostname(node: NodeFacts, hostname: str) -> NodeFacts:
    """``node`` with its ``kubernetes.io/hostname`` label back (for host-pinned pods)."""
    return replace(node, labels=(*node.labels, (HOSTNAME, hostname)))


def shortfall(
    requests: Sequence[tuple[str, int]], free: Mapping[str, int]
) -> list[tuple[str, int, int]]:
    """``(resource, wanted, free)`` for each request the node's free capacity cannot hold."""
    return [
        (name, wanted, free.get(name, 0)) for name, wanted in requests if wanted > free.get(name, 0)
    ]


def resource_reasons(requests: Sequence[tuple[str, int]], free: Mapping[str, int]) -> list[str]:
    """``Insufficient <resource>`` for each request the node's free capacity cannot hold."""
    return [
        "Too many pods" if name == PODS else f"Insufficient {name}"
        for name, _, _ in shortfall(requests, free)
    ]


def fit_message(total_nodes: int, reasons: Counter[str], preemption: Counter[str]) -> str:
    """The scheduler's FitError text from per-reason node counts (see the module docstring)."""
    if total_nodes == 0:
        return "no nodes available to schedule pods"
    head = f"0/{total_nodes} nodes are available: {_histogram(reasons)}."
    return f"{head} preemption: 0/{total_nodes} nodes are available: {_histogram(preemption)}."


def _histogram(counts: Counter[str]) -> str:
    return ", ".join(sorted(f"{count} {reason}" for reason, count in counts.items()))


def _tolerates(tolerations: Sequence[Mapping[str, Any]], key: str, value: str, effect: str) -> bool:
    for toleration in tolerations:
        wanted_effect = toleration.get("effect") or ""
        if wanted_effect and wanted_effect != effect:
            continue
        operator = toleration.get("operator") or "Equal"
        wanted_key = toleration.get("key") or ""
        if operator == "Exists" and (not wanted_key or wanted_key == key):
            return True
        if operator == "Equal" and wanted_key == key and (toleration.get("value") or "") == value:
            return True
    return False


def _term_matches(term: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    expressions = term.get("matchExpressions") or []
    return bool(expressions) and all(_expression_matches(e, labels) for e in expressions)


def _expression_matches(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, operator = expression.get("key", ""), expression.get("operator", "")
    values = [str(v) for v in expression.get("values") or []]
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and values:
        try:
            have, bound = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False
